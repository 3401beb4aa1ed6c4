//! What a night's run tells: each stage's outcome, and the one line per date that cron
//! mails (the date, the outcome, each stage's time and headline figure, from its report).

use serde_json::Value;

use super::job::Job;
use crate::error::Error;
use crate::stage::Stage;

/// What happened to one stage of one date.
pub struct StageOutcome {
    pub stage: Stage,
    /// The stage, or `<stage> of <night>` for a newer night's graph job run again.
    pub name: String,
    /// "ran", "failed", "skipped" (committed), "planned" (dry run) or "not selected".
    pub status: &'static str,
    pub seconds: f64,
    pub exit_code: Option<i32>,
    pub command: Vec<String>,
    pub report: Value,
}

/// The one line cron mails: the date, the outcome, each stage's time and main figure.
pub fn summary(
    job: &Job,
    date: &str,
    outcomes: &[StageOutcome],
    error: Option<&Error>,
    seconds: f64,
) -> String {
    let stages: Vec<String> = outcomes
        .iter()
        .filter(|o| o.status != "not selected")
        .map(|o| match o.status {
            "ran" => format!("{} {:.1}s{}", o.name, o.seconds, figure(o.stage, &o.report)),
            "failed" => format!("{} failed (exit {})", o.name, o.exit_code.unwrap_or(1)),
            status => format!("{} {status}", o.name),
        })
        .collect();
    let outcome = match error {
        None => "ok".to_string(),
        Some(e) => format!("FAILED ({})", first_line(e)),
    };
    format!(
        "{} {date} {}: {outcome} in {seconds:.1}s; {}",
        job.name,
        job.namespace(),
        stages.join(", ")
    )
}

fn first_line(e: &Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

/// A stage's headline number from its report.
fn figure(stage: Stage, report: &Value) -> String {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    match stage {
        Stage::Clean => {
            let entities = report["clean"]["entities"].as_object();
            let (out, rejected) = entities.map_or((0, 0), |e| {
                e.values().fold((0, 0), |(o, r), c| {
                    (o + n(&c["records_out"]), r + n(&c["rejected"]))
                })
            });
            format!(" ({out} rows, {rejected} rejected)")
        }
        Stage::Load => format!(
            " ({} puts, {} users' counters changed)",
            n(&report["load"]["rows"]),
            n(&report["load"]["users_changed"])
        ),
        Stage::Friends => format!(" ({} pairs)", n(&report["friends"]["mutual_pairs"])),
        Stage::Rank => format!(
            " ({} boards)",
            report["rank"]["users_ranked"]
                .as_array()
                .map_or(0, Vec::len)
        ),
        Stage::Inbox => format!(
            " ({} feed entries, {} celebrities)",
            n(&report["inbox"]["entries"]),
            n(&report["inbox"]["celebrities_skipped"])
        ),
        Stage::Cascades => format!(" ({} cascades)", n(&report["cascades"]["cascades"])),
    }
}
