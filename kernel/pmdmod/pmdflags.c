// SPDX-License-Identifier: GPL-2.0
/*
 * forkfuzz_pmd: report the PMD entries of a process's user mappings, for
 * forkfuzz's rollback oracle (a parent PMD that Async-fork write-protected
 * and never gave its RW bit back).
 *
 *   echo PID > /sys/kernel/debug/forkfuzz_pmd/pid
 *   cat /sys/kernel/debug/forkfuzz_pmd/pmds
 *
 * prints a comment line, then one line per non-empty PMD entry that covers
 * a user VMA of PID: "ADDR FLAGS", ADDR the 2 MiB-aligned virtual address
 * in hex, FLAGS three characters: 'p' present, 'w' RW (writable), 'h' huge
 * (PSE: maps a 2 MiB page, no PTE table), '-' where a bit is clear.
 * The walk holds the mmap read lock and reads each entry once
 * (READ_ONCE), so it sees a consistent value per entry. x86-64 only.
 */
#include <linux/debugfs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pgtable.h>
#include <linux/pid.h>
#include <linux/sched/mm.h>
#include <linux/seq_file.h>

static struct dentry *dir;
static u32 target_pid;

static void show_pmd(struct seq_file *m, struct mm_struct *mm, unsigned long addr)
{
	pgd_t *pgd;
	p4d_t *p4d;
	pud_t *pud;
	pmd_t *pmdp, pmd;
	unsigned long fl;

	pgd = pgd_offset(mm, addr);
	if (pgd_none(*pgd) || pgd_bad(*pgd))
		return;
	p4d = p4d_offset(pgd, addr);
	if (p4d_none(*p4d) || p4d_bad(*p4d))
		return;
	pud = pud_offset(p4d, addr);
	if (pud_none(*pud) || pud_large(*pud) || pud_bad(*pud))
		return;
	pmdp = pmd_offset(pud, addr);
	pmd = READ_ONCE(*pmdp);
	if (pmd_none(pmd))
		return;
	fl = pmd_flags(pmd);
	seq_printf(m, "%lx %c%c%c\n", addr,
		   (fl & _PAGE_PRESENT) ? 'p' : '-',
		   (fl & _PAGE_RW) ? 'w' : '-',
		   (fl & _PAGE_PSE) ? 'h' : '-');
}

static int pmds_show(struct seq_file *m, void *v)
{
	struct task_struct *task;
	struct mm_struct *mm;
	struct vm_area_struct *vma;
	struct pid *pid;
	unsigned long addr, last = 0;
	bool any = false;
	u32 nr = READ_ONCE(target_pid);

	pid = find_get_pid(nr);
	if (!pid)
		return -ESRCH;
	task = get_pid_task(pid, PIDTYPE_PID);
	put_pid(pid);
	if (!task)
		return -ESRCH;
	mm = get_task_mm(task);
	put_task_struct(task);
	if (!mm)
		return -EINVAL;
	seq_printf(m, "# forkfuzz_pmd pid %u\n", nr);
	if (mmap_read_lock_killable(mm)) {
		mmput(mm);
		return -EINTR;
	}
	{
		VMA_ITERATOR(vmi, mm, 0);

		for_each_vma(vmi, vma) {
			for (addr = vma->vm_start & PMD_MASK; addr < vma->vm_end; addr += PMD_SIZE) {
				if (any && addr <= last)
					continue;
				show_pmd(m, mm, addr);
				last = addr;
				any = true;
			}
		}
	}
	mmap_read_unlock(mm);
	mmput(mm);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pmds);

static int __init forkfuzz_pmd_init(void)
{
	dir = debugfs_create_dir("forkfuzz_pmd", NULL);
	if (IS_ERR(dir))
		return PTR_ERR(dir);
	debugfs_create_u32("pid", 0600, dir, &target_pid);
	debugfs_create_file("pmds", 0400, dir, NULL, &pmds_fops);
	return 0;
}

static void __exit forkfuzz_pmd_exit(void)
{
	debugfs_remove_recursive(dir);
}

module_init(forkfuzz_pmd_init);
module_exit(forkfuzz_pmd_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("forkfuzz: report a process's user PMD entries (present, RW, huge) through debugfs");
