package vm

// KernelImage is the kernel image the target boots (the coverage corpus
// of a campaign is kept per image: campaign/cover.KernelID).
func (t *Target) KernelImage() string { return t.cfg.Kernel }
