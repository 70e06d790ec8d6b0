// Package layout holds no code: its test checks that imports follow the
// project's floors (README, "Layout"): vocabulary (fuzz/prog, fuzz/obs,
// fuzz/gen, fuzz/minimize, corpus, kernel), targets (agents/...), judge
// (checker/...), orchestration (campaign/...), CLI (cmd/...). A package
// may import its own floor and the floors below, never one above.
package layout
