//! Jobs cut into tasks for a scheduler (Slurm arrays, Ray, anything that runs commands): task `i`
//! of `n` reads a contiguous slice of the input listing, balanced by bytes, so that the tasks'
//! outputs, put together in task order, are the one-node run's.

use std::ops::Range;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Task `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub index: usize,
    pub count: usize,
}

impl Task {
    /// Task `index` of `count`, checked.
    pub fn new(index: usize, count: usize) -> Result<Task> {
        if count == 0 || index >= count {
            return Err(Error::invalid(format!(
                "task {index}/{count}: the task index must be in 0..{count} and the count at least 1"
            )));
        }
        Ok(Task { index, count })
    }

    /// The task of this Slurm array job. Slurm numbers an array's tasks by the ids given to
    /// `--array` (`0-7`, `1-15:2`, `10-40:10`): `SLURM_ARRAY_TASK_ID` is one of `MIN`, `MIN + STEP`,
    /// ... `MAX` (`SLURM_ARRAY_TASK_MIN`, `_STEP`, `_MAX`), and `SLURM_ARRAY_TASK_COUNT` says how
    /// many there are; the task index is `(ID - MIN) / STEP`. An array whose ids are not such a
    /// range (a list such as `--array=0,4,5`) cannot be numbered and is refused.
    pub fn from_slurm() -> Result<Task> {
        let var = |name: &str| -> Result<Option<usize>> {
            let Ok(v) = std::env::var(name) else { return Ok(None) };
            let bad = || Error::invalid(format!("{name}={v:?} is not a non-negative integer"));
            v.trim().parse().map(Some).map_err(|_| bad())
        };
        let (Some(id), Some(count)) = (var("SLURM_ARRAY_TASK_ID")?, var("SLURM_ARRAY_TASK_COUNT")?) else {
            return Err(Error::invalid(
                "`auto` takes the task from a Slurm array job (SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT), \
                 which this process is not part of; give the task as i/N",
            ));
        };
        let min = var("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        let step = var("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1);
        if step == 0 {
            return Err(Error::invalid("SLURM_ARRAY_TASK_STEP=0: an array's step is at least 1"));
        }
        let offset = id
            .checked_sub(min)
            .ok_or_else(|| Error::invalid(format!("SLURM_ARRAY_TASK_ID={id} is below SLURM_ARRAY_TASK_MIN={min}")))?;
        let irregular = |why: String| {
            Error::invalid(format!(
                "{why}: the array's task ids are not the range MIN-MAX:STEP that `auto` numbers tasks by \
                 (SLURM_ARRAY_TASK_MIN={min}, SLURM_ARRAY_TASK_STEP={step}, SLURM_ARRAY_TASK_COUNT={count}); \
                 submit the array as --array=0-{}, or give each task as i/N",
                count.saturating_sub(1)
            ))
        };
        if offset % step != 0 {
            return Err(irregular(format!("SLURM_ARRAY_TASK_ID={id} is not MIN + a multiple of STEP")));
        }
        if let Some(max) = var("SLURM_ARRAY_TASK_MAX")? {
            if max < min || (max - min) / step + 1 != count || (max - min) % step != 0 {
                return Err(irregular(format!("SLURM_ARRAY_TASK_MAX={max} does not end {count} ids")));
            }
        }
        Task::new(offset / step, count)
    }

    /// `part-00003-of-00008`: the name of this task's part of an output.
    pub fn part_name(&self) -> String {
        format!("part-{:05}-of-{:05}", self.index, self.count)
    }

    /// The inputs of this task among inputs of `sizes` bytes: input `j` belongs to the task
    /// whose share of the total bytes holds the input's middle byte (by count when all are
    /// empty). Tasks get contiguous, possibly empty, slices that cover every input once, in order.
    pub fn slice(&self, sizes: &[u64]) -> Range<usize> {
        let owner = owners(sizes, self.count);
        let start = owner.iter().position(|&t| t >= self.index).unwrap_or(sizes.len());
        let end = owner.iter().position(|&t| t > self.index).unwrap_or(sizes.len());
        start..end
    }
}

impl FromStr for Task {
    type Err = Error;

    /// `i/N` (0-based `i`), or `auto` for the task of a Slurm array job.
    fn from_str(s: &str) -> Result<Task> {
        if s == "auto" {
            return Task::from_slurm();
        }
        let parsed = s.split_once('/').and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
        let Some((index, count)) = parsed else {
            return Err(Error::invalid(format!("{s:?} is not a task: give i/N (0-based i, e.g. 3/8) or auto")));
        };
        Task::new(index, count)
    }
}

/// The task of each input (non-decreasing).
fn owners(sizes: &[u64], count: usize) -> Vec<usize> {
    let total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
    let n = count as u128;
    let mut before = 0u128;
    sizes
        .iter()
        .enumerate()
        .map(|(j, &size)| {
            let owner = if total == 0 {
                j as u128 * n / sizes.len() as u128
            } else {
                // The middle of input j, 2x to stay in integers: (2*before + size) / (2*total).
                (2 * before + u128::from(size)) * n / (2 * total)
            };
            before += u128::from(size);
            owner.min(n - 1) as usize
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_names() {
        let t: Task = "3/8".parse().unwrap();
        assert_eq!((t.index, t.count, t.part_name().as_str()), (3, 8, "part-00003-of-00008"));
        for bad in ["8/8", "1/0", "x", "1-2", "-1/3"] {
            assert!(bad.parse::<Task>().is_err(), "{bad}");
        }
    }

    /// Sets the Slurm array variables of one task, runs `f`, and removes them (one test holds
    /// the environment: no other test of this crate reads these variables).
    fn with_slurm<T>(vars: &[(&str, &str)], f: impl FnOnce() -> T) -> T {
        const NAMES: [&str; 5] = ["ID", "COUNT", "MIN", "MAX", "STEP"];
        for (name, value) in vars {
            std::env::set_var(format!("SLURM_ARRAY_TASK_{name}"), value);
        }
        let out = f();
        for name in NAMES {
            std::env::remove_var(format!("SLURM_ARRAY_TASK_{name}"));
        }
        out
    }

    #[test]
    fn slurm_arrays_are_numbered_by_min_and_step() {
        // --array=1-15:2: ids 1, 3, ... 15, eight tasks; id 7 is task 3.
        let all = [("ID", "7"), ("COUNT", "8"), ("MIN", "1"), ("MAX", "15"), ("STEP", "2")];
        assert_eq!(with_slurm(&all, Task::from_slurm).unwrap(), Task { index: 3, count: 8 });
        // --array=10-40:10 without MAX: id 40 is task 3 of 4.
        let no_max = [("ID", "40"), ("COUNT", "4"), ("MIN", "10"), ("STEP", "10")];
        assert_eq!(with_slurm(&no_max, || "auto".parse::<Task>()).unwrap(), Task { index: 3, count: 4 });
        // --array=0,4,5 (not a range): refused rather than numbered wrongly.
        let list = [("ID", "4"), ("COUNT", "3"), ("MIN", "0"), ("MAX", "5"), ("STEP", "1")];
        let err = with_slurm(&list, Task::from_slurm).unwrap_err().to_string();
        assert!(err.contains("SLURM_ARRAY_TASK_MAX=5") && err.contains("i/N"), "{err}");
        let off_step = [("ID", "4"), ("COUNT", "8"), ("MIN", "1"), ("STEP", "2")];
        let err = with_slurm(&off_step, Task::from_slurm).unwrap_err().to_string();
        assert!(err.contains("not MIN + a multiple of STEP"), "{err}");
    }

    #[test]
    fn balanced_by_bytes() {
        // 305 bytes in thirds of 101.7: the middles of the inputs fall at 50, 100.5, 101.5 |
        // 102.5, 153 | 203.5, 204.5, 255: 102, 101 and 102 bytes per task.
        let sizes = [100, 1, 1, 1, 100, 1, 1, 100];
        let slices: Vec<_> = (0..3).map(|i| Task::new(i, 3).unwrap().slice(&sizes)).collect();
        assert_eq!(slices, [0..3, 3..5, 5..8]);
    }

    proptest! {
        #[test]
        fn slices_cover_every_input_once_in_order(
            sizes in proptest::collection::vec(prop_oneof![Just(0u64), 0u64..1000, 0u64..u64::MAX / 4096], 0..40),
            count in 1usize..12,
        ) {
            let mut next = 0;
            for index in 0..count {
                let r = Task::new(index, count).unwrap().slice(&sizes);
                prop_assert_eq!(r.start, next);
                prop_assert!(r.end >= r.start);
                next = r.end;
            }
            prop_assert_eq!(next, sizes.len());
            // With one task per input or fewer and all inputs equal, no task is left empty.
            if !sizes.is_empty() && count <= sizes.len() && sizes.iter().all(|&s| s == sizes[0]) {
                for index in 0..count {
                    prop_assert!(!Task::new(index, count).unwrap().slice(&sizes).is_empty());
                }
            }
        }
    }
}
