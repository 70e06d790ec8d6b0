package campaign

// FindingFiles are called on every FindingStore.Save; the files they return
// are written into the finding directory too (campaign/report adds
// report.html and report.json this way, from above this floor).
var FindingFiles []func(f *Finding) map[string][]byte
