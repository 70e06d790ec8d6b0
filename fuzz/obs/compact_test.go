package obs

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCompactJSON(t *testing.T) {
	v := View{Proc: 1, At: AtStart,
		Pages: PageDigests{{Region: 0, Page: 1, Digest: 1<<64 - 1, NonZero: 512}, {Region: 3, Page: 0, Digest: 7, NonZero: 1}},
		Words: Words{{Region: 0, Off: 0x1008, Value: 1<<64 - 1}, {Region: -1, Off: 0, Value: 1}}}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `"pages":"AQACAYAIBgEQ/Qc=","words":"AQCQQAEBj0AE"`
	if !strings.Contains(string(b), want) {
		t.Errorf("JSON %s, want it to contain %s", b, want)
	}
	var got View
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Errorf("round trip: %+v, want %+v", got, v)
	}
	// The flat arrays of older files.
	flat := `{"proc":1,"at":-1,"pages":[0,1,18446744073709551615,512,3,0,7,1],"words":[0,4104,18446744073709551615,-1,0,1]}`
	got = View{}
	if err := json.Unmarshal([]byte(flat), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Errorf("flat form: %+v, want %+v", got, v)
	}
	// The object form of older files.
	old := `{"proc":1,"at":-1,"pages":[{"region":0,"page":1,"digest":18446744073709551615,"nonzero":512},{"region":3,"page":0,"digest":7,"nonzero":1}],` +
		`"words":[{"region":0,"off":4104,"value":18446744073709551615},{"region":-1,"off":0,"value":1}]}`
	got = View{}
	if err := json.Unmarshal([]byte(old), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Errorf("object form: %+v, want %+v", got, v)
	}
	for _, empty := range []string{`{}`, `{"words":null,"pages":null}`, `{"words":[],"pages":[ ]}`} {
		got = View{}
		if err := json.Unmarshal([]byte(empty), &got); err != nil || len(got.Words)+len(got.Pages) != 0 {
			t.Errorf("%s: %+v, %v", empty, got, err)
		}
	}
}

func TestCompactJSONErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"words":[1,2]}`, "2 numbers, not a multiple of 3"},
		{`{"words":[1,2,3.5]}`, `unexpected '.' after element 2`},
		{`{"words":[1,-2,3]}`, "entry 0: negative offset or value"},
		{`{"words":[1,2,18446744073709551616]}`, "number 2 out of range"},
		{`{"words":[2147483648,0,1]}`, "entry 0: 2147483648 out of range"},
		{`{"pages":[0,1,-7,1]}`, "entry 0: negative digest"},
		{`{"pages":[0,1,7]}`, "3 numbers, not a multiple of 4"},
		{`{"pages":["a"]}`, "element 0 is not an integer"},
		{`{"pages":{}}`, "want an array of integers"},
		{`{"words":"AQ"}`, "illegal base64"},
		{`{"words":""}`, "empty (no version byte)"},
		{`{"words":"Ag=="}`, "version 2, want 1"},
		{`{"words":"AQCQ"}`, "entry 0, field 1: truncated"},
		{`{"words":"AYCAgIAQAAA="}`, "entry 0: region: 2147483648 out of range"},
		{`{"pages":"AQACAQ=="}`, "entry 0, field 3: truncated"},
		{`{"pages":"AQAAAICAgIAQ"}`, "pages: packed list: entry 0: field 3: 2147483648 out of range"},
	} {
		var v View
		err := json.Unmarshal([]byte(tc.in), &v)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

// The decoders are also called on bytes encoding/json did not check.
func TestCompactUnchecked(t *testing.T) {
	var ws Words
	if err := ws.UnmarshalJSON([]byte(`[1,2,3,]`)); err == nil || !strings.Contains(err.Error(), "trailing comma") {
		t.Errorf("trailing comma: %v", err)
	}
	if err := ws.UnmarshalJSON([]byte(`[1,2,3 4]`)); err == nil || !strings.Contains(err.Error(), "unexpected '4'") {
		t.Errorf("missing comma: %v", err)
	}
}

// FuzzCompactJSON: any input is read or refused without a panic, and
// what is read survives a round trip.
func FuzzCompactJSON(f *testing.F) {
	f.Add([]byte(`"AQCQQAEBj0AE"`))
	f.Add([]byte(`"AQACAYAIBgEQ/Qc="`))
	f.Add([]byte(`[0,4104,18446744073709551615,-1,0,1]`))
	f.Add([]byte(`[{"region":0,"off":8,"value":1}]`))
	f.Add([]byte(`[0,1,7,1, 2,3,4,5]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ws Words
		if ws.UnmarshalJSON(b) == nil {
			out, _ := ws.MarshalJSON()
			var again Words
			if err := again.UnmarshalJSON(out); err != nil || len(again) != len(ws) || len(ws) > 0 && !reflect.DeepEqual(again, ws) {
				t.Fatalf("words %q: round trip %q gave %v, %v", b, out, again, err)
			}
		}
		var ps PageDigests
		if ps.UnmarshalJSON(b) == nil {
			out, _ := ps.MarshalJSON()
			var again PageDigests
			if err := again.UnmarshalJSON(out); err != nil || len(again) != len(ps) || len(ps) > 0 && !reflect.DeepEqual(again, ps) {
				t.Fatalf("pages %q: round trip %q gave %v, %v", b, out, again, err)
			}
		}
		var ts TimedStores
		if ts.UnmarshalJSON(b) == nil {
			out, _ := ts.MarshalJSON()
			var again TimedStores
			if err := again.UnmarshalJSON(out); err != nil || len(again) != len(ts) || len(ts) > 0 && !reflect.DeepEqual(again, ts) {
				t.Fatalf("stores %q: round trip %q gave %v, %v", b, out, again, err)
			}
		}
	})
}

func TestTimedStoresJSON(t *testing.T) {
	tl := ThreadLog{Thread: 2, Stores: TimedStores{
		{Op: 15, Slot: 0, Value: 11889503016526544896, Inv: 260107185217992, Resp: 260107185581502},
		{Op: 15, Slot: 1, Value: 11889503016526544897, Inv: 260107185647337, Resp: 260107185647526},
		{Op: 3, Slot: 7, Value: 1, Inv: 1, Resp: 1<<64 - 1},
	}}
	b, err := json.Marshal(tl)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"stores":"`) {
		t.Errorf("JSON %s: stores not packed", b)
	}
	var got ThreadLog
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tl) {
		t.Errorf("round trip: %+v, want %+v", got, tl)
	}
	// Older files: a list of objects.
	old := `{"thread":2,"stores":[{"op":15,"slot":0,"value":11889503016526544896,"inv":260107185217992,"resp":260107185581502},` +
		`{"op":15,"slot":1,"value":11889503016526544897,"inv":260107185647337,"resp":260107185647526},{"op":3,"slot":7,"value":1,"inv":1,"resp":18446744073709551615}]}`
	got = ThreadLog{}
	if err := json.Unmarshal([]byte(old), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tl) {
		t.Errorf("object form: %+v, want %+v", got, tl)
	}
	// Two stores a slot apart take a few bytes each.
	many := make(TimedStores, 1000)
	for i := range many {
		many[i] = TimedStore{Op: 4, Slot: i, Value: 0xA5<<56 | 5<<24 | uint64(i), Inv: 1e12 + uint64(i)*300, Resp: 1e12 + uint64(i)*300 + 120}
	}
	if b, _ := many.MarshalJSON(); len(b) > 1000*12 {
		t.Errorf("1000 regular stores packed into %d bytes, want at most 12 a store", len(b))
	}
	var bad TimedStores
	if err := bad.UnmarshalJSON([]byte(`"AQEBAQE="`)); err == nil || !strings.Contains(err.Error(), "stores: packed list: entry 0, field 4: truncated") {
		t.Errorf("truncated store: %v", err)
	}
}
