// Package layout holds no code: its tests keep the project's shape.
//
// Imports follow the floors (README, "Layout"): vocabulary (fuzz/prog,
// fuzz/obs, fuzz/gen, fuzz/minimize, corpus, kernel, internal), targets
// (agents/...), judge (checker/...), orchestration (campaign/...), CLI
// (cmd/...). A package may import its own floor and the floors below, never
// one above (TestNoUpwardImports).
//
// The README's layout table lists every package of go list ./... on the
// floor the floors map gives it, and nothing else (TestREADMELayout). Every
// relative link of README.md and docs/ resolves, anchors included
// (TestDocLinks); the README links every page of docs/
// (TestREADMELinksEveryDoc), keeps its two-command Quick start and stays
// under readmeMaxLines lines (TestREADMEShape).
package layout
