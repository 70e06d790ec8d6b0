package cow

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// Files returns the program files of the expressible cases, by name.
func Files() map[string][]byte {
	out := map[string][]byte{}
	for _, c := range Cases() {
		if c.Missing == "" {
			out[c.File] = c.Text
		}
	}
	return out
}

var groupTitle = map[Group]string{
	Anon:    "Anonymous memory in private mappings (`anon_test_cases`)",
	AnonTHP: "Anonymous THP, collapsed before or after fork (`anon_thp_test_cases`, PMD-mapped THP)",
	NonAnon: "Non-anonymous pages in private mappings (`non_anon_test_cases`)",
}

// Matrix renders one Markdown table per group: a row per body, a column
// per kind, each cell cell(c).
func Matrix(cases []Case, cell func(c *Case) string) string {
	var sb strings.Builder
	for _, g := range []Group{Anon, AnonTHP, NonAnon} {
		var kinds []*Kind
		var rows [][]*Case
		byBody := map[*Body][]*Case{}
		var order []*Body
		for i := range cases {
			c := &cases[i]
			if c.Body.Group != g {
				continue
			}
			if _, ok := byBody[c.Body]; !ok {
				order = append(order, c.Body)
			}
			byBody[c.Body] = append(byBody[c.Body], c)
			if len(order) == 1 {
				kinds = append(kinds, c.Kind)
			}
		}
		for _, bd := range order {
			rows = append(rows, byBody[bd])
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "\n%s:\n\n| cow.c test |", groupTitle[g])
		for _, k := range kinds {
			d := k.Desc
			if d == "" {
				d = "THP (2048 kB)"
			}
			fmt.Fprintf(&sb, " %s |", d)
		}
		sb.WriteString("\n|---|" + strings.Repeat("---|", len(kinds)) + "\n")
		for _, row := range rows {
			fmt.Fprintf(&sb, "| %s |", row[0].Body.Desc)
			for _, c := range row {
				fmt.Fprintf(&sb, " %s |", cell(c))
			}
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

// reasons lists the distinct reasons a case is missing, lettered.
func reasons(cases []Case) (letter map[string]string, legend string) {
	letter = map[string]string{}
	count := map[string]int{}
	var rs []string
	for _, c := range cases {
		if c.Missing == "" {
			continue
		}
		count[c.Missing]++
		if letter[c.Missing] == "" {
			rs = append(rs, c.Missing)
			letter[c.Missing] = string(rune('A' + len(letter)))
		}
	}
	sort.Slice(rs, func(i, j int) bool { return letter[rs[i]] < letter[rs[j]] })
	var sb strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&sb, "- **%s** (%d): %s.\n", letter[r], count[r], r)
	}
	return letter, sb.String()
}

// CasesSection is the generated part of docs/cow.md: counts, the matrix
// of programs and missing cases, and the reasons.
func CasesSection() string {
	cases := Cases()
	letter, legend := reasons(cases)
	n := 0
	for _, c := range cases {
		if c.Missing == "" {
			n++
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d cases, %d expressible as forkfuzz programs (a link to the program), %d not yet (the letter says why; in the list, how many cases each reason leaves out).\n",
		len(cases), n, len(cases)-n)
	sb.WriteString(Matrix(cases, func(c *Case) string {
		if c.Missing != "" {
			return "no (" + letter[c.Missing] + ")"
		}
		return "[program](../corpus/cow/" + c.File + ")"
	}))
	sb.WriteString("\nWhy a case is not expressible yet:\n\n" + legend)
	return sb.String()
}

// Markers around a generated section of docs/cow.md.
func beginMarker(section string) string { return "<!-- generated: " + section + " begin -->\n" }
func endMarker(section string) string   { return "<!-- generated: " + section + " end -->\n" }

// Section returns the generated section of doc between its markers.
func Section(doc []byte, section string) (string, error) {
	b, e := beginMarker(section), endMarker(section)
	i := bytes.Index(doc, []byte(b))
	j := bytes.Index(doc, []byte(e))
	if i < 0 || j < i {
		return "", fmt.Errorf("cow: no %q ... %q markers", strings.TrimSpace(b), strings.TrimSpace(e))
	}
	return string(doc[i+len(b) : j]), nil
}

// ReplaceSection returns doc with the section between its markers set to
// content.
func ReplaceSection(doc []byte, section, content string) ([]byte, error) {
	b, e := beginMarker(section), endMarker(section)
	i := bytes.Index(doc, []byte(b))
	j := bytes.Index(doc, []byte(e))
	if i < 0 || j < i {
		return nil, fmt.Errorf("cow: no %q ... %q markers", strings.TrimSpace(b), strings.TrimSpace(e))
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(b)])
	out.WriteString(content)
	out.Write(doc[j:])
	return out.Bytes(), nil
}
