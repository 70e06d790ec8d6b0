package obs

import (
	"encoding/json"
	"sort"
)

// A view whose word list is complete (not Truncated) determines its page
// digests: each page's is the sum of WordDigest over its non-zero words.
// The executor leaves such views' digests out of the observation it sends
// (OmitDerivedPages), about 40% of a view's bytes, and readers of the
// JSON compute them again (View.UnmarshalJSON). A capped view keeps its
// digests: they are all there is of the words past the cap.

// OmitDerivedPages drops the page digests of every view whose words are
// complete, before the observation is encoded: View.UnmarshalJSON
// derives them again.
func (o *Observation) OmitDerivedPages() {
	for i := range o.Views {
		if v := &o.Views[i]; !v.Truncated {
			v.Pages = nil
		}
	}
}

// PagesFromWords computes the page digests of complete words ws: one
// entry per page with a non-zero word, in (region, page) order.
func PagesFromWords(ws Words) PageDigests {
	const pageSize = 4096
	var out PageDigests
	sorted := true
	for _, w := range ws {
		// Zero words are not content; a word past page 2^31 (no view
		// has one: the checker ignores words beyond a region's span)
		// would make a page number the packed form cannot carry.
		if w.Value == 0 || w.Off/pageSize >= 1<<31 {
			continue
		}
		page := int(w.Off / pageSize)
		n := len(out)
		if n > 0 && out[n-1].Region == w.Region && out[n-1].Page == page {
			out[n-1].Digest += WordDigest(w.Off%pageSize, w.Value)
			out[n-1].NonZero++
			continue
		}
		if n > 0 && (out[n-1].Region > w.Region || out[n-1].Region == w.Region && out[n-1].Page > page) {
			sorted = false
		}
		out = append(out, PageDigest{Region: w.Region, Page: page, Digest: WordDigest(w.Off%pageSize, w.Value), NonZero: 1})
	}
	if sorted {
		return out
	}
	// Words out of address order (never from the executor): merge the
	// entries of each page.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Region != out[j].Region {
			return out[i].Region < out[j].Region
		}
		return out[i].Page < out[j].Page
	})
	merged := out[:0]
	for _, p := range out {
		if n := len(merged); n > 0 && merged[n-1].Region == p.Region && merged[n-1].Page == p.Page {
			merged[n-1].Digest += p.Digest
			merged[n-1].NonZero += p.NonZero
			continue
		}
		merged = append(merged, p)
	}
	return merged
}

// UnmarshalJSON reads a view; a complete one without page digests (the
// executor's, OmitDerivedPages) gets them from its words.
func (v *View) UnmarshalJSON(b []byte) error {
	type plain View
	if err := json.Unmarshal(b, (*plain)(v)); err != nil {
		return err
	}
	if v.Pages == nil && !v.Truncated && len(v.Words) > 0 {
		v.Pages = PagesFromWords(v.Words)
	}
	return nil
}
