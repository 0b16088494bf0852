//! `greenlight workflow run PLAN`: the plan read and checked, the environment read once and
//! passed down, the agent families built the way `goal run` builds them, the runtime
//! (`greenlight_workflow::run`) driven on the state database, and its end rendered.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use greenlight_agent::{AdapterOptions, Dispatcher};
use greenlight_goal::drive::{Families, OpenAiArgs, parse_agent};
use greenlight_store::Store;
use greenlight_workflow::run::dispatch::Agents;
use greenlight_workflow::run::gate_step::GateSettings;
use greenlight_workflow::run::store_journal::StoreJournal;
use greenlight_workflow::run::{self, Ended, Error, Launch, Report, Settings};

use crate::agents::EveryFamily;
use crate::cmd::workflow::exit;
use crate::duration::parse_duration;

/// An agent step's deadline when the plan sets no `timeoutSec`, as `goal run`'s default turn.
const DEFAULT_AGENT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// `workflow run`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The plan file (YAML).
    #[arg(value_name = "PLAN.yaml")]
    pub plan: PathBuf,
    /// The id to give a new run (a positive number; default: the next free one).
    #[arg(long, value_name = "ID", conflicts_with = "resume")]
    pub run_id: Option<String>,
    /// Resume the paused, interrupted or killed run ID with the same plan and arguments.
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    /// An argument of the plan, NAME=VALUE (repeatable); on resume, a pause's resume argument.
    #[arg(long = "arg", value_name = "NAME=VALUE", value_parser = parse_arg)]
    pub args: Vec<(String, String)>,
    /// Dispatch units the run may use [default: the plan's budget.dispatches, else its worst case].
    #[arg(long, value_name = "N", conflicts_with = "resume")]
    pub budget: Option<u64>,
    /// Wall-clock time the run may take [default: the plan's budget.wallClockSec; none].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "resume")]
    pub max_wall_clock: Option<Duration>,
    /// On resume: dispatch units to add (recorded; capped).
    #[arg(long, value_name = "N")]
    pub budget_extra: Option<u64>,
    /// On resume: wall-clock time to add (recorded; capped).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wall_clock_extra: Option<Duration>,
    /// On resume: reported tokens to add to the plan's budget.tokens cap (recorded; capped).
    #[arg(long, value_name = "N")]
    pub tokens_extra: Option<u64>,
    /// On resume: US dollars to add to the plan's budget.costUsd cap (recorded; capped).
    #[arg(long, value_name = "USD")]
    pub cost_extra: Option<f64>,
    /// One JSON object on stdout at the end (a pause's includes the resume command).
    #[arg(long)]
    pub json: bool,
    /// The state database: a file, or a postgres:// URL [default: $GREENLIGHT_STORE, else $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
}

pub(crate) fn parse_arg(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: write NAME=VALUE"))?;
    Ok((name.trim().to_owned(), value.to_owned()))
}

/// The plan's agents, built from every family as `goal run` builds its agent.
pub(crate) struct PlanAgents<'a> {
    pub(crate) families: &'a EveryFamily,
}

impl Agents for PlanAgents<'_> {
    fn dispatcher(
        &self,
        agent: &str,
        model: Option<&str>,
        env: &[(String, String)],
    ) -> Result<(Arc<dyn Dispatcher>, String), String> {
        let spec = parse_agent(
            agent,
            model.map(str::to_owned),
            &OpenAiArgs::default(),
            self.families,
        )?;
        let mut options = AdapterOptions::default();
        let mut base: Vec<_> = self
            .families
            .environment()
            .iter()
            .filter(|(k, _)| !env.iter().any(|(name, _)| k == name.as_str()))
            .cloned()
            .collect();
        base.extend(env.iter().map(|(k, v)| (k.into(), v.into())));
        options.base_env = Some(base);
        if let Some(template) = &spec.argv_template {
            let (bin, args) = template
                .split_first()
                .ok_or("the agent template is empty")?;
            options.bin = Some(PathBuf::from(bin));
            options.command_args = args.to_vec();
        }
        let dispatcher = self
            .families
            .dispatcher(spec.family, options, spec.endpoint.as_ref())?;
        Ok((Arc::from(dispatcher), spec.model.unwrap_or_default()))
    }
}

/// Runs `workflow run` and returns its exit code.
pub fn run(args: RunArgs) -> i32 {
    let shown = args.plan.display().to_string();
    let checked = match crate::cmd::workflow::read_checked(&args.plan, "run") {
        Ok((_, checked)) => checked,
        Err(why) => return input_error(&args, &why),
    };
    let env = crate::environment::get();
    let state = match env.state_path(args.state.as_deref()) {
        Ok(p) => p,
        Err(e) => return input_error(&args, &e.to_string()),
    };
    let mut store = match Store::open(&state) {
        Ok(s) => s,
        Err(e) => return error(&args, None, &e.to_string()),
    };
    let start_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let repository = match run::worktrees::common_dir(&start_dir) {
        Ok(dir) => dir,
        Err(e) => return input_error(&args, &e.to_string()),
    };
    let settings = Settings {
        gates: GateSettings {
            kill_grace: env.kill_grace,
            lock_root: env.lock_root.clone(),
            env: env.vars.clone(),
            cache: greenlight_run::cache_place::cache_settings(Some(store.path()), env),
            remote: Some(crate::remote::settings()),
        },
        agent_timeout: DEFAULT_AGENT_TIMEOUT,
    };
    let launch = Launch {
        plan_path: shown.clone(),
        plan: checked,
        start_dir,
        run_id: args.run_id.clone(),
        resume: args.resume.clone(),
        args: args.args.iter().cloned().collect::<BTreeMap<_, _>>(),
        budget: args.budget,
        max_wall_clock: args.max_wall_clock,
        budget_extra: args.budget_extra,
        wall_clock_extra: args.wall_clock_extra,
        tokens_extra: args.tokens_extra,
        cost_extra_usd: args.cost_extra,
    };
    let families = EveryFamily::from_process_env();
    let agents = PlanAgents {
        families: &families,
    };
    let ran = greenlight_proc::run_main(|signals| async {
        let mut journal = StoreJournal::new(&mut store, repository);
        run::run(launch, &settings, &agents, &mut journal, signals).await
    });
    match ran {
        Ok(Ok(report)) => render(&args, &report),
        Ok(Err(Error::Input(why))) => input_error(&args, &why),
        Ok(Err(Error::Refused(refusal))) => {
            let reason = refusal.reason.as_str();
            if args.json {
                let doc = serde_json::json!({
                    "run": args.resume,
                    "status": "refused",
                    "reason": reason,
                    "message": refusal.message,
                });
                outln!("{doc}");
            } else {
                errln!("greenlight: resume refused ({reason}): {}", refusal.message);
            }
            exit::RESUME_REFUSED
        }
        Ok(Err(e)) => error(
            &args,
            args.resume.as_deref().or(args.run_id.as_deref()),
            &e.to_string(),
        ),
        Err(e) => error(
            &args,
            None,
            &format!("cannot start the async runtime or its signal handlers: {e}"),
        ),
    }
}

fn input_error(args: &RunArgs, why: &str) -> i32 {
    if args.json {
        let doc = serde_json::json!({ "plan": args.plan.display().to_string(), "status": "error", "message": why });
        outln!("{doc}");
    } else {
        errln!("greenlight: {why}");
    }
    exit::PLAN_ERROR
}

fn error(args: &RunArgs, run: Option<&str>, why: &str) -> i32 {
    if args.json {
        let doc = serde_json::json!({ "run": run, "status": "error", "message": why });
        outln!("{doc}");
    } else {
        errln!("greenlight: {why}");
    }
    exit::ERROR
}

/// The command that resumes `run`.
fn resume_command(args: &RunArgs, run: &str) -> String {
    let mut cmd = format!(
        "greenlight workflow run {} --resume {run}",
        shell_word(&args.plan.display().to_string())
    );
    for (name, value) in &args.args {
        cmd.push_str(&format!(
            " --arg {}",
            shell_word(&format!("{name}={value}"))
        ));
    }
    if let Some(state) = &args.state {
        cmd.push_str(&format!(
            " --state {}",
            shell_word(&state.display().to_string())
        ));
    }
    cmd
}

fn shell_word(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@+,".contains(c))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn kept_json(report: &Report) -> Vec<serde_json::Value> {
    report
        .kept
        .iter()
        .map(|t| {
            serde_json::json!({
                "step": t.step, "item": t.item, "branch": t.branch,
                "path": t.path.display().to_string(),
            })
        })
        .collect()
}

fn render(args: &RunArgs, report: &Report) -> i32 {
    let run = &report.run;
    let (status, code, reason, step, message): (&str, i32, Option<&str>, Option<&str>, String) =
        match &report.ended {
            Ended::Completed => (
                "completed",
                exit::VALID,
                None,
                None,
                "every step finished".into(),
            ),
            Ended::Failed {
                step,
                reason,
                detail,
            } => (
                "failed",
                exit::FAILED,
                Some(reason.as_str()),
                Some(step),
                detail.clone(),
            ),
            Ended::Terminal(label) => (
                "terminal",
                exit::TERMINAL,
                None,
                Some(label),
                format!("a gate's fail route ended the run at terminal:{label}"),
            ),
            Ended::Paused {
                step,
                reason,
                message,
            } => (
                "paused",
                exit::PAUSED,
                reason.map(|r| r.as_str()),
                Some(step),
                message.clone(),
            ),
            Ended::Interrupted(signal) => (
                "interrupted",
                signal.exit_code(),
                None,
                None,
                format!("stopped by {}", signal.name()),
            ),
        };
    let resume = matches!(report.ended, Ended::Paused { .. } | Ended::Interrupted(_))
        .then(|| resume_command(args, run));
    if args.json {
        let doc = serde_json::json!({
            "run": run,
            "status": status,
            "reason": reason,
            "step": step,
            "message": message,
            "dispatched": report.dispatched,
            "kept": kept_json(report),
            "resume": resume,
        });
        outln!("{doc}");
    } else {
        let why = reason.map(|r| format!(" ({r})")).unwrap_or_default();
        outln!("greenlight: workflow run {run} {status}{why}: {message}");
        for tree in &report.kept {
            outln!("  kept {} at {}", tree.branch, tree.path.display());
        }
        if let Some(resume) = resume {
            outln!("  resume: {resume}");
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_split_at_the_first_equals_sign() {
        assert_eq!(parse_arg("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_arg("nope").is_err());
        assert_eq!(shell_word("plan.yaml"), "plan.yaml");
        assert_eq!(shell_word("my plan's.yaml"), "'my plan'\\''s.yaml'");
    }

    #[test]
    fn a_state_path_is_kept_in_the_resume_command() {
        let args = RunArgs {
            plan: std::path::Path::new("p.yaml").into(),
            run_id: None,
            resume: None,
            args: vec![("ticket".into(), "GL 1".into())],
            budget: None,
            max_wall_clock: None,
            budget_extra: None,
            wall_clock_extra: None,
            tokens_extra: None,
            cost_extra: None,
            json: true,
            state: Some("s.db".into()),
        };
        assert_eq!(
            resume_command(&args, "3"),
            "greenlight workflow run p.yaml --resume 3 --arg 'ticket=GL 1' --state s.db"
        );
    }
}
