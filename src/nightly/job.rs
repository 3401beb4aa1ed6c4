//! The job file of `weibo-etl run` (`jobs/nightly.toml`): where the data lives, the HBase
//! namespace, and the stages with their options, with every value open to `--set` and to the
//! environment, so one file serves the local cluster, a test and production.
//!
//! Invariants: a stage's command line is a pure function of the job, its overrides and the
//! date (plus, for `friends`, the committed follows nights up to it), so `--dry-run` prints
//! exactly what a run does; an unknown key, stage or stage option is a usage error, never
//! silently ignored. The file format is in `docs/nightly.md`.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::stage::Stage;

/// Stage flags `run` sets itself: a job file giving them would fight the run (a `resume`
/// after clean ran again, a report elsewhere than where committed stages are looked for).
const RUN_OWNED: [&str; 9] = [
    "input",
    "output",
    "date",
    "report",
    "namespace",
    "resume",
    "checkpoint",
    "hdfs",
    "hbase",
];

/// Top-level keys that name places and the namespace; each can be overridden by
/// `--set key=value` or `WEIBO_ETL_<KEY>`.
pub const PLACES: [&str; 5] = ["root", "raw", "clean", "graph", "namespace"];

/// A parsed job file with its overrides applied.
#[derive(Clone, Debug)]
pub struct Job {
    /// The job's name (the lock and the reports are named by it).
    pub name: String,
    places: BTreeMap<String, String>,
    /// Stages in run order, each with its options as `--flag value` pairs.
    pub stages: Vec<JobStage>,
}

/// One stage and the options the job file (and `--set stage.option=value`) gives it.
#[derive(Clone, Debug)]
pub struct JobStage {
    pub stage: Stage,
    pub options: Vec<(String, toml::Value)>,
}

fn usage(origin: &str, message: impl std::fmt::Display) -> Error {
    Error::Usage(format!("{origin}: {message}"))
}

/// A `--set` value as TOML when it reads as one (numbers, booleans), else as a string.
fn set_value(text: &str) -> toml::Value {
    let doc = format!("v = {text}");
    match doc.parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::from(text)),
        Err(_) => toml::Value::from(text),
    }
}

impl Job {
    /// Parses `text` (read from `origin`), then applies the environment (`env`, asked for
    /// `WEIBO_ETL_<KEY>` of each place) and the `--set` overrides, in that order.
    pub fn parse(
        text: &str,
        origin: &str,
        sets: &[(String, String)],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Job> {
        let mut doc: toml::Table = text.parse().map_err(|e| usage(origin, e))?;
        let name = match doc.remove("name") {
            Some(toml::Value::String(s)) => s,
            Some(_) => return Err(usage(origin, "`name` must be a string")),
            None => "nightly".to_string(),
        };
        let mut places = BTreeMap::new();
        for key in PLACES {
            match doc.remove(key) {
                Some(toml::Value::String(s)) => {
                    places.insert(key.to_string(), s);
                }
                Some(_) => return Err(usage(origin, format!("`{key}` must be a string"))),
                None => {}
            }
        }
        let order: Vec<String> = match doc.remove("stages") {
            Some(toml::Value::Array(a)) => a
                .into_iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s),
                    _ => Err(usage(origin, "`stages` must list stage names")),
                })
                .collect::<Result<_>>()?,
            Some(_) => return Err(usage(origin, "`stages` must be a list")),
            None => Stage::ALL.iter().map(|s| s.name().to_string()).collect(),
        };
        let mut options: BTreeMap<String, Vec<(String, toml::Value)>> = BTreeMap::new();
        let tables = match doc.remove("options") {
            Some(toml::Value::Table(t)) => t,
            Some(_) => return Err(usage(origin, "`options` must be a table")),
            None => toml::Table::new(),
        };
        if let Some(key) = doc.keys().next() {
            return Err(usage(
                origin,
                format!(
                    "unknown key `{key}` (keys: name, {}, stages, options)",
                    PLACES.join(", ")
                ),
            ));
        }
        for (key, value) in tables {
            if Stage::of(&key).is_none() {
                return Err(usage(
                    origin,
                    format!(
                        "options for unknown stage `{key}` (stages: {})",
                        Stage::names()
                    ),
                ));
            }
            let toml::Value::Table(table) = value else {
                return Err(usage(origin, format!("`options.{key}` must be a table")));
            };
            options.insert(key, table.into_iter().collect());
        }
        for key in PLACES {
            if let Some(v) = env(&format!("WEIBO_ETL_{}", key.to_uppercase())) {
                places.insert(key.to_string(), v);
            }
        }
        for (key, value) in sets {
            match key.split_once('.') {
                None if PLACES.contains(&key.as_str()) => {
                    places.insert(key.clone(), value.clone());
                }
                Some((stage, option)) if Stage::of(stage).is_some() => {
                    let opts = options.entry(stage.to_string()).or_default();
                    opts.retain(|(k, _)| k != option);
                    opts.push((option.to_string(), set_value(value)));
                }
                _ => {
                    return Err(usage(
                        "--set",
                        format!(
                            "unknown key `{key}` (places: {}; stage options: <stage>.<option>)",
                            PLACES.join(", ")
                        ),
                    ))
                }
            }
        }
        for (key, default) in [
            ("root", "hdfs:///weibo"),
            ("raw", "{root}/raw/dt={date}"),
            ("clean", "{root}/clean"),
            ("graph", "{root}/graph"),
            ("namespace", "weibo"),
        ] {
            places
                .entry(key.to_string())
                .or_insert_with(|| default.to_string());
        }
        let mut stages: Vec<JobStage> = Vec::new();
        for name in order {
            let Some(stage) = Stage::of(&name) else {
                return Err(usage(origin, format!("unknown stage `{name}`")));
            };
            if let Some(prev) = stages.last().map(|s| s.stage) {
                if prev >= stage {
                    return Err(usage(
                        origin,
                        format!("stage `{name}` must come after `{prev}`, once"),
                    ));
                }
            }
            stages.push(JobStage {
                stage,
                options: options.remove(&name).unwrap_or_default(),
            });
        }
        if let Some(stage) = options.keys().next() {
            return Err(usage(
                origin,
                format!("options for `{stage}`, which `stages` does not list"),
            ));
        }
        for stage in &stages {
            let owned = stage
                .options
                .iter()
                .find(|(k, _)| RUN_OWNED.contains(&k.as_str()));
            if let Some((key, _)) = owned {
                return Err(usage(
                    origin,
                    format!(
                        "`{}.{key}` is set by `run` itself and cannot be an option",
                        stage.stage
                    ),
                ));
            }
        }
        Ok(Job {
            name,
            places,
            stages,
        })
    }

    /// A place (`root`, `raw`, `clean`, `graph`) for `date`, its `{…}` references filled in.
    pub fn place(&self, key: &str, date: &str) -> String {
        self.fill(&self.places[key], date)
    }

    pub fn namespace(&self) -> &str {
        &self.places["namespace"]
    }

    /// Fills `{date}`, `{namespace}` and the places into `text`.
    pub fn fill(&self, text: &str, date: &str) -> String {
        let mut out = text.replace("{date}", date);
        // A place may name another (raw under root); three rounds reach any chain of them.
        for _ in 0..3 {
            for (k, v) in &self.places {
                out = out.replace(&format!("{{{k}}}"), v);
            }
            out = out.replace("{date}", date);
        }
        out
    }

    /// Where this job's runs keep their reports and lock: `<root>/_runs/<namespace>/`.
    pub fn runs_dir(&self) -> String {
        format!(
            "{}/_runs/{}",
            self.place("root", "").trim_end_matches('/'),
            self.namespace()
        )
    }

    /// The lock of this job file's runs into its namespace.
    pub fn lock_path(&self) -> String {
        format!("{}/{}.lock", self.runs_dir(), self.name)
    }

    /// The reports of one date's run: `<root>/_runs/<namespace>/dt=<date>/`.
    pub fn date_dir(&self, date: &str) -> String {
        format!("{}/dt={date}", self.runs_dir())
    }

    /// The arguments of a stage's command (after the global options): the job's places,
    /// the date, then the stage's options. `friends` gets the follows root: it reads the
    /// committed nights up to its date, and continues from the friends of an earlier night
    /// only when given the root (docs/nightly.md).
    pub fn stage_args(&self, stage: &JobStage, date: &str) -> Vec<String> {
        let mut args: Vec<String> = vec![stage.stage.name().to_string()];
        let mut push = |a: &str, b: String| {
            args.push(a.to_string());
            args.push(b);
        };
        match stage.stage {
            Stage::Clean => {
                push("--input", self.place("raw", date));
                push("--output", self.place("clean", date));
            }
            Stage::Load => push("--input", self.place("clean", date)),
            // The friends of the same night are under the same graph folder (rank reads them).
            Stage::Rank | Stage::Inbox | Stage::Cascades => {
                push("--input", self.place("clean", date));
                push("--output", self.place("graph", date));
            }
            Stage::Friends => {
                push("--input", format!("{}/follows", self.place("clean", date)));
                push("--output", self.place("graph", date));
            }
        }
        push("--date", date.to_string());
        for (key, value) in &stage.options {
            let flag = format!("--{key}");
            let mut one = |v: &toml::Value| match v {
                toml::Value::Boolean(true) => args.push(flag.clone()),
                toml::Value::Boolean(false) => {}
                toml::Value::String(s) => {
                    args.push(flag.clone());
                    args.push(self.fill(s, date));
                }
                other => {
                    args.push(flag.clone());
                    args.push(other.to_string());
                }
            };
            match value {
                toml::Value::Array(items) => items.iter().for_each(&mut one),
                v => one(v),
            }
        }
        args
    }
}

/// Parses `key=value` for `--set`.
pub fn parse_set(s: &str) -> std::result::Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("{s:?} is not key=value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stage's name, in run order.
    const STAGES: [&str; 6] = ["clean", "load", "friends", "rank", "inbox", "cascades"];

    const FILE: &str = r#"
name = "nightly"
root = "hdfs:///weibo"
raw = "{root}/raw/dt={date}"
stages = ["clean", "load", "friends", "rank", "inbox", "cascades"]

[options.clean]
max-reject-ratio = 0.05

[options.load]
writers = 4

[options.friends]
load = true

[options.rank]
top = 50

[options.inbox]
k = 20
"#;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn places_stages_and_options_make_the_command_lines() {
        let job = Job::parse(FILE, "nightly.toml", &[], &no_env).unwrap();
        let names: Vec<&str> = job.stages.iter().map(|s| s.stage.name()).collect();
        assert_eq!(names, STAGES);
        assert_eq!(
            job.stage_args(&job.stages[0], "2026-11-29"),
            [
                "clean",
                "--input",
                "hdfs:///weibo/raw/dt=2026-11-29",
                "--output",
                "hdfs:///weibo/clean",
                "--date",
                "2026-11-29",
                "--max-reject-ratio",
                "0.05"
            ]
        );
        assert_eq!(
            job.stage_args(&job.stages[2], "2026-11-29").join(" "),
            "friends --input hdfs:///weibo/clean/follows \
             --output hdfs:///weibo/graph --date 2026-11-29 --load"
        );
        assert_eq!(
            job.stage_args(&job.stages[3], "2026-11-29").join(" "),
            "rank --input hdfs:///weibo/clean --output hdfs:///weibo/graph \
             --date 2026-11-29 --top 50"
        );
        assert_eq!(
            job.stage_args(&job.stages[4], "2026-11-29").join(" "),
            "inbox --input hdfs:///weibo/clean --output hdfs:///weibo/graph \
             --date 2026-11-29 --k 20"
        );
        assert_eq!(job.lock_path(), "hdfs:///weibo/_runs/weibo/nightly.lock");
        assert_eq!(
            job.date_dir("2026-11-29"),
            "hdfs:///weibo/_runs/weibo/dt=2026-11-29"
        );
    }

    #[test]
    fn the_environment_then_set_override_the_file() {
        let env = |k: &str| (k == "WEIBO_ETL_ROOT").then(|| "/data/w".to_string());
        let sets = [
            ("namespace".to_string(), "test".to_string()),
            ("load.writers".to_string(), "8".to_string()),
            ("friends.load".to_string(), "false".to_string()),
            ("root".to_string(), "/data/x".to_string()),
        ];
        let job = Job::parse(FILE, "nightly.toml", &sets[..2], &env).unwrap();
        assert_eq!(job.place("raw", "2026-11-29"), "/data/w/raw/dt=2026-11-29");
        assert_eq!(job.namespace(), "test");
        let load = job.stage_args(&job.stages[1], "2026-11-29");
        assert_eq!(load[load.len() - 2..], ["--writers", "8"]);
        let job = Job::parse(FILE, "nightly.toml", &sets, &env).unwrap();
        assert_eq!(job.place("clean", "d"), "/data/x/clean");
        assert!(!job
            .stage_args(&job.stages[2], "d")
            .contains(&"--load".to_string()));
    }

    #[test]
    fn unknown_keys_stages_and_orders_are_usage_errors() {
        for (text, needle) in [
            ("colour = 'red'", "unknown key `colour`"),
            ("[options.shuffle]\nx = 1", "unknown stage `shuffle`"),
            ("stages = ['load', 'clean']", "must come after"),
            ("stages = ['clean', 'shuffle']", "unknown stage `shuffle`"),
            (
                "stages = ['clean']\n[options.load]\nwriters = 2",
                "does not list",
            ),
            ("root = 3", "must be a string"),
            (
                "[options.load]\nresume = true",
                "`load.resume` is set by `run`",
            ),
            ("[clean", "nightly.toml"),
        ] {
            let e = Job::parse(text, "nightly.toml", &[], &no_env).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        let e = Job::parse("", "f", &[("rot".into(), "x".into())], &no_env).unwrap_err();
        assert!(e.to_string().contains("unknown key `rot`"), "{e}");
        assert_eq!(parse_set("a.b=c=d").unwrap(), ("a.b".into(), "c=d".into()));
        assert!(parse_set("novalue").is_err());
    }
}
