package minimize

import "github.com/forkfuzz/forkfuzz/fuzz/gen"

// ddmin runs delta debugging over the current program's op-units: split
// them into n chunks, try keeping one chunk alone, then removing one chunk;
// on success restart from the smaller program, else double n until chunks
// are single units.
func (m *minimizer) ddmin() {
	n := 2
	for !m.stats.Exhausted {
		units := gen.Units(m.cur)
		if len(units) < 2 {
			return
		}
		n = min(n, len(units))
		chunks := split(len(units), n)
		progress := false
		for _, c := range chunks {
			if m.try(m.without(units, func(i int) bool { return i < c[0] || i >= c[1] })) {
				n, progress = 2, true
				break
			}
		}
		if !progress && n > 2 { // for n == 2 complements are the subsets
			for _, c := range chunks {
				if m.try(m.without(units, func(i int) bool { return i >= c[0] && i < c[1] })) {
					n, progress = max(n-1, 2), true
					break
				}
			}
		}
		if !progress {
			if n == len(units) {
				return
			}
			n = min(2*n, len(units))
		}
	}
}

// split cuts [0, size) into n nearly equal [start, end) chunks.
func split(size, n int) [][2]int {
	chunks := make([][2]int, 0, n)
	start := 0
	for i := 0; i < n; i++ {
		end := start + (size-start)/(n-i)
		chunks = append(chunks, [2]int{start, end})
		start = end
	}
	return chunks
}

// oneMinimal removes single units until no single unit can go.
func (m *minimizer) oneMinimal() {
	for changed := true; changed && !m.stats.Exhausted; {
		changed = false
		units := gen.Units(m.cur)
		for i := 0; i < len(units); i++ {
			if m.try(m.without(units, func(j int) bool { return j == i })) {
				changed = true
				units = gen.Units(m.cur)
				i--
			}
		}
	}
}
