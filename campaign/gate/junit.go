package gate

import (
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// JUnit XML as CI systems read it (the Ant/Jenkins JUnit schema:
// testsuites > testsuite > testcase > failure|error|skipped, system-out).
// Required attributes: testsuite name, tests, failures, errors, time,
// timestamp, hostname; testcase name, classname, time; failure and error
// type (message is optional but always set here).

// JUnitSuites is the root element.
type JUnitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one testsuite.
type JUnitSuite struct {
	Name       string          `xml:"name,attr"`
	ID         int             `xml:"id,attr"`
	Package    string          `xml:"package,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Hostname   string          `xml:"hostname,attr"`
	Properties *JUnitProps     `xml:"properties,omitempty"`
	Cases      []JUnitTestCase `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

// JUnitProps are a suite's properties.
type JUnitProps struct {
	Props []JUnitProp `xml:"property"`
}

// JUnitProp is one property.
type JUnitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitTestCase is one test case.
type JUnitTestCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *JUnitProblem `xml:"failure,omitempty"`
	Error     *JUnitProblem `xml:"error,omitempty"`
	Skipped   *JUnitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// JUnitProblem is a failure or an error.
type JUnitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// JUnitSkipped marks a test case that did not run.
type JUnitSkipped struct {
	Message string `xml:"message,attr"`
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// xmlSafe drops characters XML 1.0 cannot carry (console logs may hold
// control characters).
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20 || r == 0xfffe || r == 0xffff || (r >= 0xd800 && r <= 0xdfff):
			return -1
		}
		return r
	}, s)
}

// add appends c to s and updates the counts.
func (s *JUnitSuite) add(c JUnitTestCase) {
	c.Name, c.SystemOut = xmlSafe(c.Name), xmlSafe(c.SystemOut)
	s.Tests++
	switch {
	case c.Failure != nil:
		s.Failures++
		c.Failure.Message, c.Failure.Text = xmlSafe(c.Failure.Message), xmlSafe(c.Failure.Text)
	case c.Error != nil:
		s.Errors++
		c.Error.Message, c.Error.Text = xmlSafe(c.Error.Message), xmlSafe(c.Error.Text)
	case c.Skipped != nil:
		s.Skipped++
		c.Skipped.Message = xmlSafe(c.Skipped.Message)
	}
	s.Cases = append(s.Cases, c)
}

// WriteJUnit writes the result as JUnit XML.
func (r *Result) WriteJUnit(w io.Writer) error {
	return writeXML(w, r.JUnit())
}

func writeXML(w io.Writer, js *JUnitSuites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", " ")
	if err := enc.Encode(js); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// JUnit builds the XML document: suite "forkfuzz.gate" (kernel check,
// boot, program count), "forkfuzz.corpus" (one case per replayed
// program) and "forkfuzz.oracles" (one case per oracle family: fails
// when a new finding of that oracle was made; known and pre-existing
// findings are listed in its system-out).
func (r *Result) JUnit() *JUnitSuites {
	host := r.Hostname
	if host == "" {
		host = "localhost"
	}
	ts := r.Started.UTC().Format("2006-01-02T15:04:05")
	props := &JUnitProps{Props: []JUnitProp{
		{Name: "seed", Value: fmt.Sprint(r.Seed)},
		{Name: "target", Value: r.Kernel.Target},
		{Name: "kernel", Value: r.Kernel.Image},
		{Name: "kernel.sha256", Value: r.Kernel.SHA256},
		{Name: "kernel.release", Value: r.Kernel.Release},
		{Name: "outcome", Value: r.Outcome},
	}}
	gateS := JUnitSuite{Name: "forkfuzz.gate", ID: 0, Package: "forkfuzz", Timestamp: ts, Hostname: host, Properties: props}
	for _, ph := range r.Phases {
		c := JUnitTestCase{Name: "phase " + ph.Name, Classname: "forkfuzz.gate", Time: secs(ph.Duration)}
		switch {
		case ph.Error != "":
			c.Error = &JUnitProblem{Message: ph.Error, Type: "harness-error", Text: ph.Error}
		case ph.Skipped != "":
			c.Skipped = &JUnitSkipped{Message: ph.Skipped}
		default:
			c.SystemOut = ph.Note
		}
		gateS.add(c)
	}
	mp := JUnitTestCase{Name: fmt.Sprintf("programs ran >= %d", r.MinPrograms), Classname: "forkfuzz.gate", Time: "0.000",
		SystemOut: fmt.Sprintf("%d programs (%d corpus, %d fuzzed), %d forks", r.Programs, r.CorpusPrograms, r.FuzzPrograms, r.Forks)}
	switch {
	case r.Programs < int64(r.MinPrograms):
		mp.Error = &JUnitProblem{Type: "min-programs", Message: fmt.Sprintf("only %d programs ran, fewer than --min-programs %d", r.Programs, r.MinPrograms), Text: mp.SystemOut}
	case r.FuzzPrograms < int64(r.MinFuzzPrograms):
		mp.Error = &JUnitProblem{Type: "min-fuzz-programs", Message: r.fewFuzzed(), Text: mp.SystemOut}
	}
	gateS.add(mp)
	gateS.add(r.harnessCase())
	for _, c := range r.Fixes {
		gateS.add(fixCase(c))
	}

	corpS := JUnitSuite{Name: "forkfuzz.corpus", ID: 1, Package: "forkfuzz", Timestamp: ts, Hostname: host}
	for _, cp := range r.Corpus {
		corpS.add(r.corpusCase(cp))
	}

	orS := JUnitSuite{Name: "forkfuzz.oracles", ID: 2, Package: "forkfuzz", Timestamp: ts, Hostname: host}
	for _, o := range r.Oracles {
		orS.add(r.oracleCase(o))
	}
	js := &JUnitSuites{Name: "forkfuzz ci", Time: secs(r.Elapsed)}
	gateS.Time = secs(r.Elapsed)
	corpS.Time = secs(r.phaseDuration("replay"))
	orS.Time = secs(r.phaseDuration("fuzz"))
	for _, s := range []JUnitSuite{gateS, corpS, orS} {
		js.Tests += s.Tests
		js.Failures += s.Failures
		js.Errors += s.Errors
		js.Skipped += s.Skipped
		js.Suites = append(js.Suites, s)
	}
	return js
}

// harnessCase is the gate's harness health: unreproduced executor
// deaths and hangs, and harness events never replayed.
func (r *Result) harnessCase() JUnitTestCase {
	hh := JUnitTestCase{Name: fmt.Sprintf("harness health: unreproduced executor deaths <= %d", r.MaxHarnessFlakes), Classname: "forkfuzz.gate", Time: "0.000",
		SystemOut: fmt.Sprintf("%d run(s) with an executor death or hang that did not reproduce; %d harness errors", r.HarnessFlakeRuns, r.HarnessErrors)}
	for _, f := range r.Findings {
		if f.Status == StatusHarnessFlake {
			hh.SystemOut += "\n" + f.Signature + ": " + f.StatusReason
		}
	}
	for _, f := range r.Findings {
		if f.Status == StatusUnconfirmed {
			hh.SystemOut += "\n" + f.Signature + ": " + f.StatusReason
		}
	}
	switch {
	case r.Counts.Unconfirmed > 0:
		hh.Error = &JUnitProblem{Type: "harness-unconfirmed", Message: fmt.Sprintf("%d harness event(s) never replayed: the gate can neither blame the kernel nor clear it", r.Counts.Unconfirmed), Text: hh.SystemOut}
	case r.HarnessFlakeRuns > int64(r.MaxHarnessFlakes):
		hh.Error = &JUnitProblem{Type: "harness-unhealthy", Message: fmt.Sprintf("%d runs with an unreproduced executor death or hang, more than --max-harness-flakes %d", r.HarnessFlakeRuns, r.MaxHarnessFlakes), Text: hh.SystemOut}
	}

	return hh
}

// fixCase is the case of a --fixes claim: a failure when the patched
// kernel still fails the reproducer, an error when the claim could not
// be confirmed.
func fixCase(c FixCase) JUnitTestCase {
	jc := JUnitTestCase{Name: "fixes " + c.Path, Classname: "forkfuzz.gate.fixes", Time: "0.000",
		SystemOut: c.Reason + "\nbaseline: " + c.BaselineCommand + "\npatched: " + c.PatchedCommand}
	switch c.Status {
	case FixFixed:
	case FixNotFixed:
		jc.Failure = &JUnitProblem{Type: "not-fixed", Message: c.Reason, Text: jc.SystemOut}
	default:
		jc.Error = &JUnitProblem{Type: "fix-unconfirmed", Message: c.Reason, Text: jc.SystemOut}
	}
	return jc
}

// corpusCase is the case of a replayed corpus program.
func (r *Result) corpusCase(cp CorpusCase) JUnitTestCase {
	c := JUnitTestCase{Name: cp.Name, Classname: "forkfuzz.corpus." + cp.Source, Time: secs(cp.Duration)}
	switch cp.Status {
	case "pass":
		c.SystemOut = cp.Judged
	case "skipped":
		c.Skipped = &JUnitSkipped{Message: cp.Note}
	case "harness-error":
		c.Error = &JUnitProblem{Type: "harness-error", Message: cp.Note, Text: cp.Note}
	default: // fail
		// Each signature with its own status: the case fails if any is
		// new (by the first one's, [known, new] read as a pass while
		// the gate exited 1).
		var parts []string
		anyNew := false
		for _, sig := range cp.Signatures {
			status := StatusNew
			if f := r.findingBySig([]string{sig}); f != nil {
				status = f.Status
			}
			anyNew = anyNew || status == StatusNew
			parts = append(parts, fmt.Sprintf("%s (%s)", sig, status))
		}
		text := cp.Explanation + "\n\nreplay: " + cp.Replay
		msg := strings.Join(parts, ", ")
		if anyNew || len(cp.Signatures) == 0 {
			c.Failure = &JUnitProblem{Type: "finding", Message: msg, Text: text}
		} else {
			c.SystemOut = msg + "\n" + text
		}
	}
	return c
}

// oracleCase is the case of an oracle family: it fails when a new
// finding of that oracle was made.
func (r *Result) oracleCase(o OracleCase) JUnitTestCase {
	c := JUnitTestCase{Name: o.Oracle, Classname: "forkfuzz.oracles", Time: "0.000"}
	var newF, other []string
	var text strings.Builder
	for _, f := range r.Findings {
		if f.Oracle != o.Oracle {
			continue
		}
		line := fmt.Sprintf("%s [group %s, %s]", f.Signature, f.Group, f.Status)
		if f.Status == StatusNew {
			newF = append(newF, f.Signature)
			fmt.Fprintf(&text, "== %s\n%s\n\nreplay: %s\n%s\n\n", line, f.Explanation, f.Replay, f.Reproducibility())
		} else {
			other = append(other, line+": "+f.StatusReason)
		}
	}
	switch {
	case len(newF) > 0:
		c.Failure = &JUnitProblem{Type: o.Oracle, Message: fmt.Sprintf("%d new finding(s): %s", len(newF), strings.Join(newF, ", ")), Text: text.String()}
		c.SystemOut = strings.Join(other, "\n")
	case o.NotApplicable != "":
		c.Skipped = &JUnitSkipped{Message: o.NotApplicable}
	case o.Judgments == 0 && len(other) == 0:
		c.Skipped = &JUnitSkipped{Message: fmt.Sprintf("not exercised: 0 %s in %d programs", o.Needs, r.Programs)}
	default:
		c.SystemOut = strings.TrimPrefix(fmt.Sprintf("judged %d %s\n", o.Judgments, o.Needs)+strings.Join(other, "\n"), "\n")
	}
	return c
}

// xmlNode is any XML element, for ValidateJUnit.
type xmlNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []xmlNode  `xml:",any"`
	Text    string     `xml:",chardata"`
}

// get is n's attribute name.
func (n xmlNode) get(name string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

// need checks that n, described by where, has the attributes names.
func (n xmlNode) need(where string, names ...string) error {
	for _, a := range names {
		if _, ok := n.get(a); !ok {
			return fmt.Errorf("junit: %s: missing required attribute %q", where, a)
		}
	}
	return nil
}

// nonNeg is n's attribute a as a non-negative integer (0 when absent).
func (n xmlNode) nonNeg(where, a string) (int, error) {
	v, ok := n.get(a)
	if !ok {
		return 0, nil
	}
	var x int
	if _, err := fmt.Sscanf(v, "%d", &x); err != nil || x < 0 || fmt.Sprint(x) != v {
		return 0, fmt.Errorf("junit: %s: %s=%q is not a non-negative integer", where, a, v)
	}
	return x, nil
}

// decimal checks that n's attribute a, if any, is a decimal number of
// seconds.
func (n xmlNode) decimal(where, a string) error {
	v, ok := n.get(a)
	if !ok {
		return nil
	}
	var f float64
	if _, err := fmt.Sscanf(v, "%g", &f); err != nil || f < 0 || strings.ContainsAny(v, "eE,") {
		return fmt.Errorf("junit: %s: %s=%q is not a decimal number of seconds", where, a, v)
	}
	return nil
}

// checkCounts checks that n's counts (tests, failures, errors, skipped),
// where given, are those of count.
func (n xmlNode) checkCounts(where, holds string, count map[string]int) error {
	for _, a := range []string{"tests", "failures", "errors", "skipped"} {
		v, err := n.nonNeg(where, a)
		if err != nil {
			return err
		}
		if _, ok := n.get(a); ok && v != count[a] {
			return fmt.Errorf("junit: %s: %s=%d but %s %d", where, a, v, holds, count[a])
		}
	}
	return nil
}

// ValidateJUnit checks a JUnit XML document against the shape of the
// Ant/Jenkins JUnit schema (junit-10.xsd) that CI systems read: a
// testsuites root (or a single testsuite); each testsuite with name,
// tests, failures, errors, time, timestamp (xs:dateTime without zone)
// and hostname; only properties, testcase, system-out and system-err
// inside it; each testcase with name, classname and time and at most one
// of failure, error, skipped; failure and error with a type; counts that
// match the test cases. It is what the tests hold the gate's output to.
func ValidateJUnit(b []byte) error {
	var root xmlNode
	if err := xml.Unmarshal(b, &root); err != nil {
		return fmt.Errorf("junit: not well-formed XML: %w", err)
	}
	var suites []xmlNode
	switch root.XMLName.Local {
	case "testsuites":
		for _, n := range root.Nodes {
			if n.XMLName.Local != "testsuite" {
				return fmt.Errorf("junit: testsuites: unexpected element <%s>", n.XMLName.Local)
			}
			suites = append(suites, n)
		}
	case "testsuite":
		suites = []xmlNode{root}
	default:
		return fmt.Errorf("junit: root element <%s>, want <testsuites> or <testsuite>", root.XMLName.Local)
	}
	total := map[string]int{}
	for si, s := range suites {
		count, err := validateSuite(si, s)
		if err != nil {
			return err
		}
		for _, a := range []string{"tests", "failures", "errors", "skipped"} {
			total[a] += count[a]
		}
	}
	if root.XMLName.Local == "testsuites" {
		return root.checkCounts("testsuites", "its suites hold", total)
	}
	return nil
}

// validateSuite checks testsuite si and returns its counts.
func validateSuite(si int, s xmlNode) (map[string]int, error) {
	where := fmt.Sprintf("testsuite %d", si)
	if err := s.need(where, "name", "tests", "failures", "errors", "time", "timestamp", "hostname"); err != nil {
		return nil, err
	}
	name, _ := s.get("name")
	where = fmt.Sprintf("testsuite %q", name)
	if name == "" {
		return nil, fmt.Errorf("junit: %s: empty name", where)
	}
	if ts, _ := s.get("timestamp"); !tsRE.MatchString(ts) {
		return nil, fmt.Errorf("junit: %s: timestamp %q is not xs:dateTime without a zone", where, ts)
	}
	if err := s.decimal(where, "time"); err != nil {
		return nil, err
	}
	count := map[string]int{}
	for ci, c := range s.Nodes {
		switch c.XMLName.Local {
		case "properties":
			for _, p := range c.Nodes {
				if p.XMLName.Local != "property" {
					return nil, fmt.Errorf("junit: %s: properties: unexpected <%s>", where, p.XMLName.Local)
				}
				if err := p.need(where+" property", "name", "value"); err != nil {
					return nil, err
				}
			}
			continue
		case "system-out", "system-err":
			continue
		case "testcase":
		default:
			return nil, fmt.Errorf("junit: %s: unexpected element <%s>", where, c.XMLName.Local)
		}
		if err := validateCase(fmt.Sprintf("%s testcase %d", where, ci), c, count); err != nil {
			return nil, err
		}
	}
	return count, s.checkCounts(where, "it holds", count)
}

// validateCase checks testcase c (described by cw) and counts it and its
// outcome in count.
func validateCase(cw string, c xmlNode, count map[string]int) error {
	if err := c.need(cw, "name", "classname", "time"); err != nil {
		return err
	}
	if err := c.decimal(cw, "time"); err != nil {
		return err
	}
	count["tests"]++
	outcomes := 0
	for _, e := range c.Nodes {
		switch e.XMLName.Local {
		case "failure", "error":
			if err := e.need(cw+" "+e.XMLName.Local, "type"); err != nil {
				return err
			}
			count[e.XMLName.Local+"s"]++
			outcomes++
		case "skipped":
			count["skipped"]++
			outcomes++
		case "system-out", "system-err":
		default:
			return fmt.Errorf("junit: %s: unexpected element <%s>", cw, e.XMLName.Local)
		}
	}
	if outcomes > 1 {
		return fmt.Errorf("junit: %s: more than one of failure, error, skipped", cw)
	}
	return nil
}

var tsRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$`)
