package obs

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestPagesFromWords(t *testing.T) {
	d := func(off, v uint64) uint64 { return WordDigest(off, v) }
	cases := []struct {
		name  string
		words Words
		want  PageDigests
	}{
		{"none", nil, nil},
		{"one", Words{{0, 8, 3}}, PageDigests{{0, 0, d(8, 3), 1}}},
		{"two pages", Words{{0, 8, 3}, {0, 16, 4}, {0, 4096, 5}}, PageDigests{{0, 0, d(8, 3) + d(16, 4), 2}, {0, 1, d(0, 5), 1}}},
		{"regions", Words{{0, 0, 1}, {2, 8200, 2}}, PageDigests{{0, 0, d(0, 1), 1}, {2, 2, d(8, 2), 1}}},
		{"zero skipped", Words{{0, 0, 0}, {0, 8, 1}}, PageDigests{{0, 0, d(8, 1), 1}}},
		{"out of order", Words{{1, 0, 1}, {0, 8, 2}, {1, 16, 3}}, PageDigests{{0, 0, d(8, 2), 1}, {1, 0, d(0, 1) + d(16, 3), 2}}},
	}
	for _, c := range cases {
		if got := PagesFromWords(c.words); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A complete view read without digests gets them from its words; a
// capped one, or one that has them, keeps what it says.
func TestViewDerivesPages(t *testing.T) {
	ws := Words{{0, 8, 3}, {0, 4096, 5}}
	for _, c := range []struct {
		name string
		v    View
		want PageDigests
	}{
		{"complete", View{Words: ws}, PagesFromWords(ws)},
		{"capped", View{Words: ws, Truncated: true}, nil},
		{"given", View{Words: ws, Pages: PageDigests{{0, 0, 7, 1}}}, PageDigests{{0, 0, 7, 1}}},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		var v View
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v.Pages, c.want) {
			t.Errorf("%s: pages %+v, want %+v", c.name, v.Pages, c.want)
		}
	}
}

// FuzzViewJSON: any input is read or refused without a panic; a view
// read survives a round trip.
func FuzzViewJSON(f *testing.F) {
	f.Add([]byte(`{"proc":1,"at":-1,"words":"AQCQQAEBj0AE"}`))
	f.Add([]byte(`{"proc":0,"at":3,"words":[0,8,1],"pages":[0,0,7,1],"truncated":true}`))
	f.Add([]byte(`{"runs":[{"region":0,"first":0,"n":4,"state":1}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v View
		if json.Unmarshal(b, &v) != nil {
			return
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%q: marshal: %v", b, err)
		}
		var again View
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("%q: round trip %q: %v", b, out, err)
		}
		if len(again.Words) != len(v.Words) || len(again.Pages) != len(v.Pages) {
			t.Fatalf("%q: round trip %q: %d words %d pages, want %d %d", b, out, len(again.Words), len(again.Pages), len(v.Words), len(v.Pages))
		}
	})
}
