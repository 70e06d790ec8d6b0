package checker

// migrate (move_pages to the next NUMA node) changes no memory the
// program can see: a moved page keeps its contents, its mapping and its
// sharing. Its errno is 0: pages that are not mapped, not present or busy
// get a per-page status, not an error; ENOMEM is allowed because the new
// page is allocated (and charged to the memory cgroup) before the old one
// is freed. On a thread (migrate, migrateloop) the result races with the
// main thread like every thread operation (threadOp). A skipped migrate
// (fewer than two NUMA nodes) is noted, so a campaign that never moved a
// page says so.
func (m *machine) migrate(pr *proc, i int) {
	if m.skippedOp(pr, i) {
		return
	}
	m.result(pr, i, either("move_pages reports pages it cannot move in its status array; the call itself fails only when the new page cannot be allocated", eOK, eNOMEM))
}
