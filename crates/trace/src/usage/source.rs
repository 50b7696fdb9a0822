//! Real rows first, the model otherwise.
use std::sync::Arc;

use super::{CpuLevels, TaskLevels, TaskUsage, Usage, UsageModel};
use crate::Run;

/// Where a usage value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageOrigin {
    /// A real row of this window.
    Real,
    /// The task's real row of the nearest earlier window (carried forward).
    RealEarlier,
    /// The model.
    Model,
}

/// Real `task_usage` rows when present, else the model.
#[derive(Clone, Debug)]
pub struct UsageSource {
    /// Shared, so several replays (threads, seeds) use one copy of a large table.
    pub real: Option<Arc<TaskUsage>>,
    pub model: UsageModel,
}

impl UsageSource {
    pub fn new(real: Option<TaskUsage>, model: UsageModel) -> UsageSource {
        UsageSource {
            real: real.map(Arc::new),
            model,
        }
    }

    /// Usage of `run` in window `window` (absolute): see [`UsageSource::lookup`].
    pub fn usage(&self, run: &Run, window: u32) -> Usage {
        self.lookup(run, window).0
    }

    /// Usage of `run` in `window` and where it came from: the real row of (job, index, window);
    /// else the task's real row of the nearest earlier window (a task keeps its last measured
    /// usage when the loaded task_usage parts end before the run does; this also carries a real
    /// row into a later run of the same task); else the model with the run's requests (also
    /// before the task's first real window).
    pub fn lookup(&self, run: &Run, window: u32) -> (Usage, UsageOrigin) {
        self.lookup_kept(run, window, &mut None, true)
    }

    /// `lookup`, keeping the task's model levels in `levels` (drawn at the first window the model
    /// answers, then reused: a replay keeps one per running task). Without `detail`, an answer of
    /// the model has only its `cpu` (the other fields are 0), for less than half the work: a
    /// replay asks for the rest only of the tasks a planner looks at.
    #[inline]
    pub fn lookup_kept(
        &self,
        run: &Run,
        window: u32,
        levels: &mut Option<TaskLevels>,
        detail: bool,
    ) -> (Usage, UsageOrigin) {
        if let Some((w, u)) = self
            .real
            .as_ref()
            .and_then(|real| real.at_or_before(run.job, run.index, window))
        {
            let origin = if w == window {
                UsageOrigin::Real
            } else {
                UsageOrigin::RealEarlier
            };
            return (u, origin);
        }
        let levels = levels.get_or_insert_with(|| {
            (self.model).levels(run.job, run.index, run.cpu_request, run.mem_request)
        });
        let usage = if detail {
            self.model.usage_at(levels, window)
        } else {
            Usage {
                cpu: self.model.cpu_at(&levels.cpu(), window),
                ..Usage::default()
            }
        };
        (usage, UsageOrigin::Model)
    }

    /// The CPU `lookup_kept` would give without detail to a task whose levels are drawn, when no
    /// real row can answer for any task (the source has none): None otherwise. It reads only the
    /// 24 bytes of `CpuLevels`, for a replay that draws every running task each window.
    #[inline]
    pub fn model_cpu(&self, levels: &CpuLevels, window: u32) -> Option<f32> {
        self.real
            .is_none()
            .then(|| self.model.cpu_at(levels, window))
    }

    /// True if real rows exist for the task (any window, any run).
    pub fn has_real(&self, job: u64, index: u32) -> bool {
        self.real.as_ref().is_some_and(|r| r.has_task(job, index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::test_data::head_root;

    fn run(job: u64, index: u32, submit: u32, end: u32) -> Run {
        Run {
            job,
            index,
            submit,
            schedule: submit,
            end,
            end_kind: crate::END_NONE,
            priority: 9,
            cpu_request: 0.125,
            mem_request: 0.07446,
            machine: 0,
            submitted_in_trace: true,
        }
    }

    #[test]
    fn usage_source_prefers_real_rows_then_the_model() {
        let root = head_root();
        let real = TaskUsage::load(root.path(), None).unwrap();
        let model = UsageModel::calibrated(9);
        let src = UsageSource::new(real, model.clone());
        let known = run(3418309, 0, 0, 3600);
        let row = Usage {
            cpu: 0.001562,
            max_cpu: 0.03967,
            mem: 0.07568,
            mai: 0.007243,
        };
        assert!(src.has_real(3418309, 0));
        assert!(!src.has_real(3418309, 99));
        assert_eq!(src.lookup(&known, 0), (row, UsageOrigin::Real));
        // Later windows carry the last real window forward, also into a later run of the task.
        assert_eq!(src.lookup(&known, 5), (row, UsageOrigin::RealEarlier));
        let later = run(3418309, 0, 7200, 9000);
        assert_eq!(src.lookup(&later, 30), (row, UsageOrigin::RealEarlier));
        // A task without real rows uses the model.
        let unknown = run(1, 2, 0, 600);
        assert_eq!(src.usage(&unknown, 1), model.usage(1, 2, 0.125, 0.07446, 1));
        // Before a task's first real window: the model.
        let u = Usage {
            cpu: 0.5,
            max_cpu: 0.75,
            mem: 0.25,
            mai: 0.01,
        };
        let late = UsageSource::new(Some(TaskUsage::from_rows([(77, 0, 10, u)])), model.clone());
        let r = run(77, 0, 0, 6000);
        let expect = model.usage(77, 0, r.cpu_request, r.mem_request, 9);
        assert_eq!(late.lookup(&r, 9), (expect, UsageOrigin::Model));
        assert_eq!(late.lookup(&r, 10), (u, UsageOrigin::Real));
        assert_eq!(late.lookup(&r, 11), (u, UsageOrigin::RealEarlier));
        // Without detail, the model answers the CPU alone, the same value.
        for (job, w) in [(1, 1), (5, 0), (77, 9), (123_456, 4000)] {
            let r = run(job, 3, 0, 6000);
            let (cpu_only, origin) = late.lookup_kept(&r, w, &mut None, false);
            let full = late.lookup(&r, w).0;
            assert_eq!(origin, UsageOrigin::Model);
            assert_eq!(cpu_only.cpu.to_bits(), full.cpu.to_bits());
            assert_eq!(
                (cpu_only.max_cpu, cpu_only.mem, cpu_only.mai),
                (0.0, 0.0, 0.0)
            );
            assert!(full.mem > 0.0);
        }
        // A real row comes whole, asked with detail or not.
        assert_eq!(late.lookup_kept(&r, 11, &mut None, false).0, u);
        // No real data at all.
        let only_model = UsageSource::new(None, model.clone());
        assert_eq!(only_model.lookup(&known, 0).1, UsageOrigin::Model);
        assert!(!only_model.has_real(3418309, 0));
        // Its kept CPU levels give the same CPU as the whole lookup; a source with real rows
        // leaves every task to `lookup_kept`.
        for (job, w) in [(1, 1), (3418309, 0), (123_456, 4000)] {
            let r = run(job, 3, 0, 6000);
            let mut levels = None;
            let (cpu_only, _) = only_model.lookup_kept(&r, w, &mut levels, false);
            let kept = levels.expect("the model drew its levels").cpu();
            let cpu = only_model.model_cpu(&kept, w).expect("no real rows");
            assert_eq!(cpu.to_bits(), cpu_only.cpu.to_bits());
            assert_eq!(late.model_cpu(&kept, w), None);
        }
    }
}
