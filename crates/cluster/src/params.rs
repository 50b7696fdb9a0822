//! Profiles (named sets of defaults) and the simulator's parameters by name: the one place that
//! maps a key such as `overcommit_ratio` to a `Config` field, both to set it (from the command
//! line or Python) and to list every resolved value (for `meta.json`).

use colosched_core::{GuardSettings, Limits, MigratableCpu, Receiver};

use crate::{
    Admission, Config, DurationOver, Penalty, Placement, Queue, Replay, TaskStart, Until, UsageGaps,
};

/// A named set of defaults. Any parameter set afterwards overrides the profile's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// The thesis's model (spec 000 ch. 4–5, and its `simulator.py` where the text is silent).
    Thesis,
    /// Every run that ends in the loaded parts, 60 s steps, random placement, FIFO queues, to
    /// the end of the loaded trace: the full-trace study (docs/cluster-sim.md).
    Full,
}

pub const PROFILES: [&str; 2] = ["thesis", "full"];

impl Profile {
    pub fn parse(name: &str) -> Result<Profile, String> {
        match name {
            "thesis" => Ok(Profile::Thesis),
            "full" => Ok(Profile::Full),
            _ => Err(format!(
                "profile: {name:?} is not one of {}",
                PROFILES.join(", ")
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Thesis => "thesis",
            Profile::Full => "full",
        }
    }

    pub fn config(self) -> Config {
        let guards = GuardSettings::default();
        let thesis = Config {
            profile: self,
            machines: 800,
            cell_size: 4,
            capacity: 0.5,
            admission: Admission::Request,
            queue: Queue::Backfill,
            overcommit_ratio: 1.0,
            step_s: 1,
            busy_interval: 1,
            idle_interval: 10,
            penalty: Penalty::Excess,
            penalty_max_priority: 2,
            placement: Placement::Cells,
            replay: Replay::Thesis,
            usage_span_s: 5011,
            until: Until::LastSubmit,
            // Where the thesis's text and its simulator.py disagree, the code (issue 27).
            task_start: TaskStart::FirstEvent,
            duration_over: DurationOver::Completed,
            usage_gaps: UsageGaps::Zero,
            kbit_bits: 1024,
            limits: Limits {
                migratable_priority_below: 3,
                migratable_cpu: MigratableCpu::Request,
                migratable_even_index: true,
                receiver: Receiver::Live,
                ..Limits::default()
            },
            machine_mem_gib: 35.84, // 512 GiB × 0.07, as in the thesis's code
            bandwidth_mbit_s: None,
            seed: 1,
            keep_series: true,
            guards: false,
            guard_hysteresis: guards.hysteresis,
            guard_min_improvement: guards.min_improvement,
            guard_cooldown_s: guards.cooldown_s,
        };
        match self {
            Profile::Thesis => thesis,
            Profile::Full => Config {
                queue: Queue::Fifo,
                step_s: 60,
                penalty: Penalty::Fixed(1.0),
                penalty_max_priority: 11,
                placement: Placement::Random,
                replay: Replay::Ended,
                until: Until::TraceEnd,
                machine_mem_gib: 32.0,
                task_start: TaskStart::LastSubmit,
                duration_over: DurationOver::Started,
                usage_gaps: UsageGaps::Fill,
                kbit_bits: 1000,
                limits: Limits::default(),
                ..thesis
            },
        }
    }
}

/// A parameter's value, as it crosses from Python or the command line.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    Int(i64),
    Float(f64),
    Text(String),
    Bool(bool),
    None,
}

/// Named values of the choice parameters.
const ADMISSION: [(&str, Admission); 2] =
    [("request", Admission::Request), ("usage", Admission::Usage)];
const GUARDS: [(&str, bool); 2] = [("none", false), ("agent", true)];
const QUEUE: [(&str, Queue); 2] = [("backfill", Queue::Backfill), ("fifo", Queue::Fifo)];
const PLACEMENT: [(&str, Placement); 3] = [
    ("cells", Placement::Cells),
    ("random", Placement::Random),
    ("trace", Placement::Trace),
];
const REPLAY: [(&str, Replay); 3] = [
    ("thesis", Replay::Thesis),
    ("ended", Replay::Ended),
    ("all", Replay::All),
];
const UNTIL: [(&str, Until); 3] = [
    ("last-submit", Until::LastSubmit),
    ("trace-end", Until::TraceEnd),
    ("drain", Until::Drain),
];
const TASK_START: [(&str, TaskStart); 2] = [
    ("first-event", TaskStart::FirstEvent),
    ("last-submit", TaskStart::LastSubmit),
];
const DURATION_OVER: [(&str, DurationOver); 2] = [
    ("completed", DurationOver::Completed),
    ("started", DurationOver::Started),
];
const USAGE_GAPS: [(&str, UsageGaps); 2] = [("zero", UsageGaps::Zero), ("fill", UsageGaps::Fill)];
const RECEIVER: [(&str, Receiver); 2] = [("live", Receiver::Live), ("fixed", Receiver::Fixed)];
const MIGRATABLE_CPU: [(&str, MigratableCpu); 2] = [
    ("max_cpu", MigratableCpu::MaxCpu),
    ("request", MigratableCpu::Request),
];

/// What a parameter takes, for a front end's option (the `sim cluster` flags); `Config::set`
/// checks the value again.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Int,
    /// An integer from 1.
    PositiveInt,
    Float,
    Bool,
    /// One of these names.
    Choice(Vec<&'static str>),
    /// One of these integers.
    IntChoice(Vec<i64>),
    /// Free text (`Config::set` parses it).
    Text,
}

/// A parameter a front end sets by name: its key (`Config::set`), its command-line flag, what it
/// takes and a line of help (empty: the defaults say enough).
#[derive(Clone, Debug, PartialEq)]
pub struct Flag {
    pub key: &'static str,
    pub flag: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

fn names<T>(options: &[(&'static str, T)]) -> Kind {
    Kind::Choice(options.iter().map(|(n, _)| *n).collect())
}

/// Every parameter the command line sets one by one, in the order `--help` lists them. The others
/// have options of their own: profile, machines, overcommit_ratio, seed, and the migratable
/// rule's priority and CPU figure (`--migratable code|text`).
pub fn flags() -> Vec<Flag> {
    use Kind::*;
    let flag = |key, flag, kind, help| Flag {
        key,
        flag,
        kind,
        help,
    };
    vec![
        flag("cell_size", "--cell-size", PositiveInt, ""),
        flag("capacity", "--capacity", Float, "machine capacity (cap)"),
        flag("warning_threshold", "--warning-threshold", Float, ""),
        flag(
            "admission",
            "--admission",
            names(&ADMISSION),
            "admission load: CPU request or current CPU usage, × ratio",
        ),
        flag(
            "queue",
            "--queue",
            names(&QUEUE),
            "backfill: every waiting task that fits starts when one leaves",
        ),
        flag(
            "runs",
            "--runs",
            names(&REPLAY),
            "replayed runs: the thesis's task set, every ended run, or all",
        ),
        flag(
            "usage_span_s",
            "--usage-span-s",
            PositiveInt,
            "thesis task set without task_usage: SCHEDULE within this span",
        ),
        flag("until", "--until", names(&UNTIL), ""),
        flag(
            "task_start",
            "--task-start",
            names(&TASK_START),
            "thesis task set: placed at the task's first event (tasks dated before the window are \
             not replayed) or at its last run's SUBMIT",
        ),
        flag(
            "duration_over",
            "--duration-over",
            names(&DURATION_OVER),
            "duration: mean over completed or all started tasks",
        ),
        flag(
            "usage_gaps",
            "--usage-gaps",
            names(&USAGE_GAPS),
            "a task with task_usage rows, in a window without one: uses nothing, or its nearest \
             earlier row (else the usage model)",
        ),
        flag(
            "kbit_bits",
            "--kbit-bits",
            IntChoice(vec![1024, 1000]),
            "bits per kbit",
        ),
        flag(
            "receiver",
            "--receiver",
            names(&RECEIVER),
            "coarse: each sender's receiver is the least loaded node at that moment, or the \
             least loaded at the start of the cycle",
        ),
        flag(
            "step_s",
            "--step",
            PositiveInt,
            "seconds of trace time per step",
        ),
        flag(
            "busy_interval",
            "--busy-interval",
            PositiveInt,
            "migration every N steps with submissions",
        ),
        flag(
            "idle_interval",
            "--idle-interval",
            PositiveInt,
            "migration every N steps without",
        ),
        flag("placement", "--placement", names(&PLACEMENT), ""),
        flag(
            "guards",
            "--guards",
            names(&GUARDS),
            "agent: wrap the policy in the node agent's guards (hysteresis, no move onto a \
             pressured node, minimum improvement, cool-down), the same code the agent runs",
        ),
        flag(
            "guard_hysteresis",
            "--guard-hysteresis",
            PositiveInt,
            "looks in a row over the line",
        ),
        flag(
            "guard_min_improvement",
            "--guard-min-improvement",
            Float,
            "load a move must gain",
        ),
        flag(
            "guard_cooldown_s",
            "--guard-cooldown-s",
            Int,
            "seconds a moved task stays",
        ),
        flag(
            "overload_penalty",
            "--overload-penalty",
            Text,
            "per overloaded step: 'excess' (min(1, excess/cap) of the step) or a fraction",
        ),
        flag(
            "penalty_max_priority",
            "--penalty-max-priority",
            Int,
            "tasks up to this priority pay it",
        ),
        flag(
            "send_over_warning",
            "--send-over-warning",
            Bool,
            "only nodes at the warning line send",
        ),
        flag(
            "cap_at_source_load",
            "--cap-at-source-load",
            Bool,
            "receivers end at most at the sender's load",
        ),
        flag(
            "min_profit",
            "--min-profit",
            Float,
            "is_useful_migrate: moved CPU ≥ this",
        ),
        flag(
            "max_profit",
            "--max-profit",
            Float,
            "is_useful_migrate: moved CPU ≤ this",
        ),
        flag(
            "max_profit_share",
            "--max-profit-share",
            Float,
            "is_useful_migrate: ≤ this × the sender's load",
        ),
        flag("migratable_cpu_below", "--migratable-cpu-below", Float, ""),
        flag(
            "migratable_even_index",
            "--migratable-even-index",
            Bool,
            "only tasks with an even task index migrate",
        ),
        flag(
            "max_moves",
            "--max-moves",
            PositiveInt,
            "moves per cell per cycle at most",
        ),
        flag(
            "keep_series",
            "--keep-series",
            Bool,
            "keep the per-step series (report plots)",
        ),
        flag(
            "machine_mem_gib",
            "--machine-mem-gib",
            Float,
            "GiB per unit of normalised memory (network cost)",
        ),
        flag(
            "bandwidth_mbit_s",
            "--bandwidth-mbit-s",
            Float,
            "migrations take bytes/bandwidth on their source's link",
        ),
    ]
}

fn name_of<T: PartialEq>(options: &[(&'static str, T)], value: &T) -> &'static str {
    options
        .iter()
        .find(|(_, v)| v == value)
        .map_or("?", |(n, _)| n)
}

fn choose<T: Copy>(key: &str, value: &Param, options: &[(&str, T)]) -> Result<T, String> {
    let names = || {
        options
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match value {
        Param::Text(text) => options
            .iter()
            .find(|(n, _)| n == text)
            .map(|(_, v)| *v)
            .ok_or_else(|| format!("{key}: {text:?} is not one of {}", names())),
        other => Err(format!("{key}: expected one of {}, got {other:?}", names())),
    }
}

fn float(key: &str, value: &Param) -> Result<f64, String> {
    match value {
        Param::Float(x) if x.is_finite() => Ok(*x),
        Param::Int(i) => Ok(*i as f64),
        other => Err(format!("{key}: expected a finite number, got {other:?}")),
    }
}

fn int<T: TryFrom<i64>>(key: &str, value: &Param) -> Result<T, String> {
    match value {
        Param::Int(i) => T::try_from(*i).map_err(|_| format!("{key}: {i} is out of range")),
        other => Err(format!("{key}: expected an integer, got {other:?}")),
    }
}

fn boolean(key: &str, value: &Param) -> Result<bool, String> {
    match value {
        Param::Bool(b) => Ok(*b),
        other => Err(format!("{key}: expected true or false, got {other:?}")),
    }
}

fn optional_float(key: &str, value: &Param) -> Result<Option<f64>, String> {
    match value {
        Param::None => Ok(None),
        other => float(key, other).map(Some),
    }
}

impl Config {
    /// The configuration of `profile` with `params` (key, value) applied in order.
    pub fn resolve<'a>(
        profile: Profile,
        params: impl IntoIterator<Item = (&'a str, Param)>,
    ) -> Result<Config, String> {
        let mut c = profile.config();
        for (key, value) in params {
            c.set(key, &value)?;
        }
        c.check()?;
        Ok(c)
    }

    /// Sets one parameter by name; the error names the key.
    pub fn set(&mut self, key: &str, value: &Param) -> Result<(), String> {
        let l = &mut self.limits;
        match key {
            "profile" => {
                return Err(
                    "profile: choose the profile first (Config::resolve), not as a parameter"
                        .into(),
                )
            }
            "machines" => self.machines = int(key, value)?,
            "cell_size" => self.cell_size = int(key, value)?,
            "capacity" => self.capacity = float(key, value)?,
            "admission" => self.admission = choose(key, value, &ADMISSION)?,
            "queue" => self.queue = choose(key, value, &QUEUE)?,
            "overcommit_ratio" => self.overcommit_ratio = float(key, value)?,
            "step_s" => self.step_s = int(key, value)?,
            "busy_interval" => self.busy_interval = int(key, value)?,
            "idle_interval" => self.idle_interval = int(key, value)?,
            "overload_penalty" => {
                self.penalty = match value {
                    Param::Text(t) if t == "excess" => Penalty::Excess,
                    Param::Text(t) => match t.parse::<f64>() {
                        Ok(x) => Penalty::Fixed(x),
                        Err(_) => {
                            return Err(format!(
                                "{key}: {t:?} is neither \"excess\" nor a fraction of a step"
                            ))
                        }
                    },
                    other => Penalty::Fixed(float(key, other)?),
                }
            }
            "penalty_max_priority" => self.penalty_max_priority = int(key, value)?,
            "placement" => self.placement = choose(key, value, &PLACEMENT)?,
            "runs" => self.replay = choose(key, value, &REPLAY)?,
            "usage_span_s" => self.usage_span_s = int(key, value)?,
            "until" => self.until = choose(key, value, &UNTIL)?,
            "task_start" => self.task_start = choose(key, value, &TASK_START)?,
            "duration_over" => self.duration_over = choose(key, value, &DURATION_OVER)?,
            "kbit_bits" => self.kbit_bits = int(key, value)?,
            "usage_gaps" => self.usage_gaps = choose(key, value, &USAGE_GAPS)?,
            "warning_threshold" => l.warning_threshold = float(key, value)?,
            "send_over_warning" => l.send_over_warning = boolean(key, value)?,
            "migratable_priority_below" => l.migratable_priority_below = int(key, value)?,
            "migratable_cpu" => l.migratable_cpu = choose(key, value, &MIGRATABLE_CPU)?,
            "migratable_cpu_below" => l.migratable_cpu_below = float(key, value)?,
            "migratable_even_index" => l.migratable_even_index = boolean(key, value)?,
            "receiver" => l.receiver = choose(key, value, &RECEIVER)?,
            "min_profit" => l.min_profit = float(key, value)?,
            "max_profit" => l.max_profit = float(key, value)?,
            "max_profit_share" => l.max_profit_share = optional_float(key, value)?,
            "max_moves" => {
                l.max_moves = match value {
                    Param::None => usize::MAX,
                    other => int(key, other)?,
                }
            }
            "cap_at_source_load" => l.cap_at_source_load = boolean(key, value)?,
            "machine_mem_gib" => self.machine_mem_gib = float(key, value)?,
            "bandwidth_mbit_s" => self.bandwidth_mbit_s = optional_float(key, value)?,
            "seed" => self.seed = int::<i64>(key, value)? as u64,
            "keep_series" => self.keep_series = boolean(key, value)?,
            "guards" => self.guards = choose(key, value, &GUARDS)?,
            "guard_hysteresis" => self.guard_hysteresis = int(key, value)?,
            "guard_min_improvement" => self.guard_min_improvement = float(key, value)?,
            "guard_cooldown_s" => self.guard_cooldown_s = int(key, value)?,
            other => {
                return Err(format!(
                    "unknown simulator parameter {other:?}; known: {}",
                    Config::default()
                        .params()
                        .iter()
                        .map(|(k, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        }
        Ok(())
    }

    /// Every parameter with its resolved value, in a stable order (for `meta.json`).
    pub fn params(&self) -> Vec<(&'static str, Param)> {
        let l = &self.limits;
        let f = Param::Float;
        let i = |x: i64| Param::Int(x);
        let t = |x: &str| Param::Text(x.to_string());
        let opt = |x: Option<f64>| x.map_or(Param::None, Param::Float);
        vec![
            ("profile", t(self.profile.name())),
            ("machines", i(self.machines as i64)),
            ("cell_size", i(self.cell_size as i64)),
            ("capacity", f(self.capacity)),
            ("admission", t(name_of(&ADMISSION, &self.admission))),
            ("queue", t(name_of(&QUEUE, &self.queue))),
            ("overcommit_ratio", f(self.overcommit_ratio)),
            ("step_s", i(i64::from(self.step_s))),
            ("busy_interval", i(i64::from(self.busy_interval))),
            ("idle_interval", i(i64::from(self.idle_interval))),
            (
                "overload_penalty",
                match self.penalty {
                    Penalty::Excess => t("excess"),
                    Penalty::Fixed(x) => f(x),
                },
            ),
            (
                "penalty_max_priority",
                i(i64::from(self.penalty_max_priority)),
            ),
            ("placement", t(name_of(&PLACEMENT, &self.placement))),
            ("runs", t(name_of(&REPLAY, &self.replay))),
            ("usage_span_s", i(i64::from(self.usage_span_s))),
            ("until", t(name_of(&UNTIL, &self.until))),
            ("task_start", t(name_of(&TASK_START, &self.task_start))),
            (
                "duration_over",
                t(name_of(&DURATION_OVER, &self.duration_over)),
            ),
            ("kbit_bits", i(i64::from(self.kbit_bits))),
            ("usage_gaps", t(name_of(&USAGE_GAPS, &self.usage_gaps))),
            ("warning_threshold", f(l.warning_threshold)),
            ("send_over_warning", Param::Bool(l.send_over_warning)),
            (
                "migratable_priority_below",
                i(i64::from(l.migratable_priority_below)),
            ),
            (
                "migratable_cpu",
                t(name_of(&MIGRATABLE_CPU, &l.migratable_cpu)),
            ),
            ("migratable_cpu_below", f(l.migratable_cpu_below)),
            (
                "migratable_even_index",
                Param::Bool(l.migratable_even_index),
            ),
            ("receiver", t(name_of(&RECEIVER, &l.receiver))),
            ("min_profit", f(l.min_profit)),
            ("max_profit", f(l.max_profit)),
            ("max_profit_share", opt(l.max_profit_share)),
            (
                "max_moves",
                if l.max_moves == usize::MAX {
                    Param::None
                } else {
                    i(l.max_moves as i64)
                },
            ),
            ("cap_at_source_load", Param::Bool(l.cap_at_source_load)),
            ("machine_mem_gib", f(self.machine_mem_gib)),
            ("bandwidth_mbit_s", opt(self.bandwidth_mbit_s)),
            ("seed", i(self.seed as i64)),
            ("keep_series", Param::Bool(self.keep_series)),
            ("guards", t(name_of(&GUARDS, &self.guards))),
            ("guard_hysteresis", i(i64::from(self.guard_hysteresis))),
            ("guard_min_improvement", f(self.guard_min_improvement)),
            ("guard_cooldown_s", i(i64::from(self.guard_cooldown_s))),
        ]
    }

    /// Rejects values no replay can use; the message names the parameter.
    pub fn check(&self) -> Result<(), String> {
        let l = &self.limits;
        let positive = [
            ("capacity", self.capacity),
            ("overcommit_ratio", self.overcommit_ratio),
            ("machine_mem_gib", self.machine_mem_gib),
        ];
        if let Some((key, x)) = positive.iter().find(|(_, x)| x.is_nan() || *x <= 0.0) {
            return Err(format!("{key}: must be positive, got {x}"));
        }
        if self.machines == 0 {
            return Err("machines: must be at least 1".into());
        }
        if self.machines >= u32::MAX as usize {
            return Err("machines: must fit in 32 bits".into());
        }
        if ![1000, 1024].contains(&self.kbit_bits) {
            return Err(format!(
                "kbit_bits: must be 1000 or 1024, got {}",
                self.kbit_bits
            ));
        }
        if self.cell_size == 0 {
            return Err("cell_size: must be at least 1".into());
        }
        if self.guard_hysteresis == 0 {
            return Err("guard_hysteresis: must be at least 1".into());
        }
        if !(self.guard_min_improvement >= 0.0 && self.guard_min_improvement.is_finite()) {
            return Err(format!(
                "guard_min_improvement: must be ≥ 0, got {}",
                self.guard_min_improvement
            ));
        }
        for (key, x) in [
            ("step_s", self.step_s),
            ("busy_interval", self.busy_interval),
            ("idle_interval", self.idle_interval),
        ] {
            if x == 0 {
                return Err(format!("{key}: must be at least 1"));
            }
        }
        if let Penalty::Fixed(x) = self.penalty {
            if !(0.0..=1.0).contains(&x) {
                return Err(format!(
                    "overload_penalty: must be \"excess\" or a fraction of a step within 0..=1, got {x}"
                ));
            }
        }
        if self
            .bandwidth_mbit_s
            .is_some_and(|b| b.is_nan() || b <= 0.0)
        {
            return Err("bandwidth_mbit_s: must be positive".into());
        }
        if l.warning_threshold.is_nan() || l.max_profit_share.is_some_and(|s| s.is_nan() || s < 0.0)
        {
            return Err(
                "warning_threshold and max_profit_share must be numbers (share ≥ 0)".into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_names_a_listed_parameter_once() {
        let listed: Vec<&str> = Profile::Thesis
            .config()
            .params()
            .iter()
            .map(|(k, _)| *k)
            .collect();
        let flags = flags();
        for (i, f) in flags.iter().enumerate() {
            assert!(listed.contains(&f.key), "{} is not a parameter", f.key);
            assert!(f.flag.starts_with("--"), "{}", f.flag);
            assert!(flags[..i]
                .iter()
                .all(|g| g.key != f.key && g.flag != f.flag));
        }
    }

    #[test]
    fn every_listed_parameter_can_be_set_back_to_its_value() {
        for profile in [Profile::Thesis, Profile::Full] {
            let base = profile.config();
            let listed = base.params();
            let mut copy = Profile::Thesis.config();
            copy.profile = profile;
            for (key, value) in &listed {
                if *key != "profile" {
                    copy.set(key, value).unwrap();
                }
            }
            assert_eq!(copy, base, "{profile:?}");
        }
    }

    #[test]
    fn a_profile_is_defaults_and_parameters_override_it() {
        let c = Config::resolve(
            Profile::Full,
            [
                ("step_s", Param::Int(1)),
                ("overload_penalty", Param::Text("excess".into())),
            ],
        )
        .unwrap();
        assert_eq!(
            (c.step_s, c.penalty, c.queue),
            (1, Penalty::Excess, Queue::Fifo)
        );
        assert_eq!(Config::default(), Profile::Thesis.config());
        assert_eq!(Profile::Thesis.config().machine_mem_gib, 35.84);
    }

    #[test]
    fn thesis_follows_the_code_where_code_and_text_disagree_and_full_the_text() {
        let rules = |c: Config| {
            let l = c.limits;
            (
                (c.task_start, c.duration_over, c.usage_gaps, c.kbit_bits),
                (l.receiver, l.migratable_priority_below, l.migratable_cpu),
                l.migratable_even_index,
            )
        };
        assert_eq!(
            rules(Profile::Thesis.config()),
            (
                (
                    TaskStart::FirstEvent,
                    DurationOver::Completed,
                    UsageGaps::Zero,
                    1024
                ),
                (Receiver::Live, 3, MigratableCpu::Request),
                true
            )
        );
        assert_eq!(
            rules(Profile::Full.config()),
            (
                (
                    TaskStart::LastSubmit,
                    DurationOver::Started,
                    UsageGaps::Fill,
                    1000
                ),
                (Receiver::Fixed, 2, MigratableCpu::MaxCpu),
                false
            )
        );
    }

    #[test]
    fn bad_parameters_name_their_key() {
        let bad = [
            (
                "queue",
                Param::Text("lifo".into()),
                "queue: \"lifo\" is not one of backfill, fifo",
            ),
            (
                "overload_penalty",
                Param::Float(1.5),
                "overload_penalty: must be",
            ),
            (
                "overload_penalty",
                Param::Text("lots".into()),
                "overload_penalty: \"lots\"",
            ),
            ("machines", Param::Int(-3), "machines: -3 is out of range"),
            ("capacity", Param::Float(0.0), "capacity: must be positive"),
            ("step_s", Param::Int(0), "step_s: must be at least 1"),
            (
                "kbit_bits",
                Param::Int(1023),
                "kbit_bits: must be 1000 or 1024",
            ),
            (
                "receiver",
                Param::Text("random".into()),
                "receiver: \"random\" is not one of live, fixed",
            ),
            (
                "nonsense",
                Param::Int(1),
                "unknown simulator parameter \"nonsense\"; known: profile, machines",
            ),
            (
                "send_over_warning",
                Param::Int(1),
                "send_over_warning: expected true or false",
            ),
        ];
        for (key, value, msg) in bad {
            let err = Config::resolve(Profile::Thesis, [(key, value)]).unwrap_err();
            assert!(err.starts_with(msg), "{key}: {err}");
        }
        assert!(Profile::parse("paper")
            .unwrap_err()
            .contains("thesis, full"));
    }
}
