//! Running a stored goal: everything between "the user asked to run goal N" and the engine.
//!
//! Which agent runs it (`--agent` parsed, the dispatcher built from what the store recorded by
//! the [`Families`] its caller passes in),
//! which gates it starts with (`--gate`, else verify.yaml's, each with its own limit and mutex)
//! and the snapshot of verify.yaml its gates are run and keyed by from then on,
//! the goal's run marker, the one-runner-per-goal lock and the sweep of what a killed runner
//! left. The binary owns the async runtime and the signals, and renders what this reports.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use greenlight_agent::{AdapterOptions, Dispatcher, Family};
use greenlight_gate::config::{Loaded, Snapshot};
use greenlight_gate::lock::{self, Acquired};
use greenlight_gate::procs::LeftoverProcess;
use greenlight_proc::InterruptWatch;
use greenlight_store::{
    AgentEndpoint, AgentSpec, GoalId, GoalState, NewGate, NewGoal, Reads, Store,
};

use crate::engine::{Engine, Finish, Settings};
use crate::error::Error;
use crate::progress::Progress;

/// A goal gate's time limit when neither `--gate-timeout` nor a verify.yaml says otherwise.
pub const DEFAULT_GATE_TIMEOUT: Duration = Duration::from_secs(300);

/// The variable every process of a goal's run carries, so that a later runner of the same goal
/// can find and end what a runner killed with SIGKILL left behind, and so that `goal gate`
/// commands can tell they run inside the goal's own agent.
pub const RUN_MARKER_VAR: &str = "GREENLIGHT_GOAL";

/// The marker of `goal` in the state database at `state`: goal ids are per database.
pub fn run_marker(state: &Path, goal: GoalId) -> (String, String) {
    // Canonical, so a process that names the same file another way carries the same marker.
    let state = state.canonicalize().unwrap_or_else(|_| state.to_path_buf());
    let db = blake3::hash(state.to_string_lossy().as_bytes()).to_hex();
    (RUN_MARKER_VAR.to_owned(), format!("{}:{goal}", &db[..16]))
}

/// Where the runner lock of the goals of the database at `state` lives.
fn runners_dir(state: &Path) -> PathBuf {
    greenlight_store::local_anchor(state).with_extension("runners")
}

/// Whether this process runs inside `goal`'s own run: it carries the goal's marker (`marker`
/// is this process's [`RUN_MARKER_VAR`], as the binary read it), or the goal's runner is one of
/// its ancestors (an agent that cleared its environment is still the runner's descendant: the
/// runner is a child subreaper, so even a double fork is adopted by it).
pub fn inside_run_of(state: &Path, goal: GoalId, marker: Option<&OsStr>) -> bool {
    let (_, value) = run_marker(state, goal);
    if marker.is_some_and(|v| v == value.as_str()) {
        return true;
    }
    let owner = runners_dir(state)
        .join(format!("goal-{goal}.lock"))
        .join("owner");
    let Some(runner) = std::fs::read_to_string(owner)
        .ok()
        .and_then(|text| serde_json::from_str::<lock::Owner>(text.trim()).ok())
        .filter(|o| o.host == lock::host_name())
        .and_then(|o| u32::try_from(o.pid).ok())
        // A runner killed with SIGKILL leaves its record; its pid may name another program by
        // now (a person's terminal, say), which must not be refused.
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "greenlight")
        })
    else {
        return false;
    };
    let mut pid = std::process::id();
    // A chain of parents ends at pid 1 (or 0); the bound only guards against a /proc that lies.
    for _ in 0..4096 {
        let Some(parent) = parent_of(pid) else {
            return false;
        };
        if parent == runner {
            return true;
        }
        if parent <= 1 {
            return false;
        }
        pid = parent;
    }
    false
}

/// The parent pid of `pid`, from `/proc/<pid>/stat` (after the command name, which may hold
/// spaces and parentheses: the last `)` ends it).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Splits an argv template on spaces, honouring single and double quotes.
pub fn split_template(template: &str) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in template.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started || !current.is_empty() {
                    args.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            (None, c) => current.push(c),
        }
    }
    if quote.is_some() {
        return Err(format!("unclosed quote in the agent template `{template}`"));
    }
    if started || !current.is_empty() {
        args.push(current);
    }
    if args.is_empty() {
        return Err(
            "the agent template is empty; write e.g. --agent 'command:my-agent {prompt_file}'"
                .into(),
        );
    }
    Ok(args)
}

/// The openai family's settings, as given on the command line (`--base-url`,
/// `--api-key-env`, `--tool-format`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenAiArgs {
    /// The server's base URL.
    pub base_url: Option<String>,
    /// The variable holding the API key (default `OPENAI_API_KEY`).
    pub api_key_env: Option<String>,
    /// `native`, `tags` or `auto` (default `auto`).
    pub tool_format: Option<String>,
}

impl OpenAiArgs {
    fn any(&self) -> bool {
        self.base_url.is_some() || self.api_key_env.is_some() || self.tool_format.is_some()
    }
}

/// What the goal loop needs from the code that knows every agent family. The binary implements
/// it (it alone depends on every family), so the loop builds without the openai family's HTTP
/// client and a new family is wired in one place.
pub trait Families {
    /// The environment an agent starts from, as the binary read it once.
    fn environment(&self) -> &[(std::ffi::OsString, std::ffi::OsString)];
    /// Checks the openai settings given on the command line and returns what the store records
    /// (never the key itself).
    fn openai_endpoint(&self, args: &OpenAiArgs) -> Result<AgentEndpoint, String>;
    /// Builds the dispatcher of `family` from the shared `options` and, for the openai family,
    /// the server the store recorded.
    fn dispatcher(
        &self,
        family: Family,
        options: AdapterOptions,
        endpoint: Option<&AgentEndpoint>,
    ) -> Result<Box<dyn Dispatcher>, String>;
}

/// Parses `--agent` (and `--model`, and the openai settings) into what the store records.
pub fn parse_agent(
    agent: &str,
    model: Option<String>,
    openai: &OpenAiArgs,
    families: &dyn Families,
) -> Result<AgentSpec, String> {
    let (family, template) = match agent {
        "claude" => (Family::Claude, None),
        "codex" => (Family::Codex, None),
        "openai" => (Family::OpenAi, None),
        other => match other.strip_prefix("command:") {
            Some(t) => (Family::Command, Some(split_template(t)?)),
            None => {
                return Err(format!(
                    "--agent `{other}`: use claude, codex, openai, or command:<argv template>"
                ));
            }
        },
    };
    let endpoint = if family == Family::OpenAi {
        Some(families.openai_endpoint(openai)?)
    } else if openai.any() {
        return Err(format!(
            "--base-url, --api-key-env and --tool-format are for --agent openai, not {family}"
        ));
    } else {
        None
    };
    let model = match (family, model) {
        (_, Some(m)) => m,
        (Family::Claude, None) => "sonnet".into(),
        (Family::Command, None) => "default".into(),
        (Family::OpenAi, None) => {
            return Err(
                "--agent openai needs --model (an id the server serves: GET <base-url>/models lists them)"
                    .into(),
            );
        }
        (Family::Codex, None) => {
            return Err("--agent codex needs --model (the model id codex should run)".into());
        }
    };
    Ok(AgentSpec {
        family,
        model: Some(model),
        argv_template: template,
        endpoint,
    })
}

/// The executable a stored goal's agent starts from: the family's CLI name, or the template's
/// program.
pub fn agent_bin(agent: &AgentSpec) -> Option<PathBuf> {
    match &agent.argv_template {
        Some(template) => template.first().map(PathBuf::from),
        // The openai family starts no executable: the probe asks its server.
        None if agent.family == Family::OpenAi => None,
        None => Some(PathBuf::from(agent.family.as_str())),
    }
}

/// Builds the dispatcher a stored goal's agent runs through, with `families`; `marker` joins its
/// environment.
pub fn dispatcher_for(
    agent: &AgentSpec,
    marker: Option<&(String, String)>,
    families: &dyn Families,
) -> Result<(Arc<dyn Dispatcher>, Family), String> {
    let family = agent.family;
    let mut options = AdapterOptions::default();
    if let Some((var, value)) = marker {
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = families
            .environment()
            .iter()
            .filter(|(k, _)| k != var.as_str())
            .cloned()
            .collect();
        env.push((var.into(), value.into()));
        options.base_env = Some(env);
    }
    if family == Family::OpenAi && agent.endpoint.is_none() {
        return Err(
            "the stored openai agent has no server; clear the goal and run it again with --base-url"
                .into(),
        );
    }
    if let Some(template) = &agent.argv_template {
        let (bin, args) = template
            .split_first()
            .ok_or("the stored agent template is empty")?;
        options.bin = Some(PathBuf::from(bin));
        options.command_args = args.to_vec();
    }
    let dispatcher = families.dispatcher(family, options, agent.endpoint.as_ref())?;
    Ok((Arc::from(dispatcher), family))
}

/// The worktree's verify.yaml ([`greenlight_gate::config::locate`]), read once and fixed: the snapshot a goal's gates are run and
/// keyed by from then on, and what it means. No file: `None`.
pub fn snapshot_verify_yaml(worktree: &Path) -> Result<Option<(Snapshot, Loaded)>, String> {
    let Some(found) = greenlight_gate::config::locate(worktree) else {
        return Ok(None);
    };
    let path = camino::Utf8PathBuf::from_path_buf(found.path)
        .map_err(|p| format!("{}: not a UTF-8 path", p.display()))?;
    Snapshot::take(&path).map(Some).map_err(|e| e.to_string())
}

/// The gates a verify.yaml declares, each with its own `timeoutSec` and `mutex`, and the
/// largest `timeoutSec` among them (the goal's time limit for gates added later).
fn declared_gates(config: &Loaded) -> (Vec<NewGate>, Option<Duration>) {
    let longest = config.gates.iter().map(|g| g.timeout_sec).max();
    let gates = config
        .gates
        .iter()
        .map(|g| NewGate {
            command: g.command.clone(),
            timeout_sec: Some(g.timeout_sec),
            mutex: g.mutex.clone(),
        })
        .collect();
    (gates, longest.map(|s| Duration::from_secs(u64::from(s))))
}

/// What `goal run` asks for, as given on the command line.
#[derive(Debug, Clone)]
pub struct GoalRequest {
    /// The worktree (canonicalised by the store).
    pub worktree: PathBuf,
    /// What the agent must achieve.
    pub text: String,
    /// `--agent`: claude, codex, openai, or `command:<argv template>`.
    pub agent: String,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`, `--api-key-env`, `--tool-format` (openai only).
    pub openai: OpenAiArgs,
    /// `--gate`, in order; empty = verify.yaml's gates.
    pub gates: Vec<String>,
    /// `--max-turns`.
    pub max_turns: u32,
    /// `--retries`.
    pub retries: u32,
    /// `--gate-timeout`.
    pub gate_timeout: Option<Duration>,
    /// `--judge`; `none` = no judge.
    pub judge: String,
}

/// A goal to create, and the verify.yaml snapshot its gates are run and keyed by (store it in
/// the transaction that creates the goal: [`greenlight_store::Tx::set_gate_config`]).
#[derive(Debug, Clone)]
pub struct PlannedGoal {
    /// The goal.
    pub goal: NewGoal,
    /// The worktree's verify.yaml when the goal was planned; `None` when there was none (or,
    /// with `--gate`, none that could be read): then no gate of the goal uses the result cache
    /// or a cluster.
    pub config: Option<Snapshot>,
}

/// The goal to create for a request, or what is wrong with it (a usage error).
pub fn plan_goal(request: GoalRequest, families: &dyn Families) -> Result<PlannedGoal, String> {
    let agent = parse_agent(&request.agent, request.model, &request.openai, families)?;
    // `--gate "$UNSET"` would be `sh -c ''`, which exits 0: a gate that always passes.
    if request.gates.iter().any(|g| g.trim().is_empty()) {
        return Err("--gate needs a command: an empty or whitespace-only gate (an unset $VAR?) would pass without judging anything".into());
    }
    let (gates, declared_timeout, config) = if request.gates.is_empty() {
        match snapshot_verify_yaml(&request.worktree)? {
            Some((snapshot, loaded)) => {
                let (gates, longest) = declared_gates(&loaded);
                (gates, longest, Some(snapshot))
            }
            None => (Vec::new(), None, None),
        }
    } else {
        // With `--gate`, a verify.yaml that cannot be read only means no cache for the goal.
        let config = snapshot_verify_yaml(&request.worktree)
            .ok()
            .flatten()
            .map(|(snapshot, _)| snapshot);
        let gates = request.gates.into_iter().map(NewGate::from).collect();
        (gates, None, config)
    };
    if gates.is_empty() {
        return Err(
            "no gates: pass --gate CMD, or declare gates in .greenlight/verify.yaml".into(),
        );
    }
    let gate_timeout = request
        .gate_timeout
        .or(declared_timeout)
        .unwrap_or(DEFAULT_GATE_TIMEOUT);
    let goal = NewGoal {
        worktree: request.worktree,
        text: request.text,
        agent,
        judge: (request.judge != "none").then_some(request.judge),
        max_turns: request.max_turns,
        retries: request.retries,
        gate_timeout_sec: u32::try_from(gate_timeout.as_secs().max(1)).unwrap_or(u32::MAX),
        gates,
    };
    Ok(PlannedGoal { goal, config })
}

/// The knobs of one run of a goal.
#[derive(Debug, Clone)]
pub struct DriveOptions {
    /// How long one agent turn (and one judge question) may take.
    pub agent_timeout: Duration,
    /// SIGTERM → SIGKILL grace for gates.
    pub kill_grace: Duration,
    /// How gates reach the remote cluster of the goal's verify.yaml.
    pub remote: Option<greenlight_gate::RemoteSettings>,
    /// The `PATH` an agent named without a path is looked up on.
    pub agent_search_path: OsString,
    /// Where gates with a `mutex` take their machine-wide lock (the one `verify` uses).
    pub lock_root: PathBuf,
    /// The environment gates see and read for their cache keys, as the binary read it.
    pub env: greenlight_proc::ProcessEnv,
    /// verify's result cache, as the goal's state database places it; `None`: no cache.
    pub cache: Option<greenlight_gate::cache::CacheSettings>,
    /// The goal's agent was just checked and probed ([`crate::preflight::check_new_agent`]):
    /// the run does not probe it again.
    pub agent_checked: bool,
}

/// Something the run reports before the loop starts, for the binary to render.
#[derive(Debug)]
pub enum Started<'a> {
    /// The run holds the goal's lock (and un-paused it): nothing can refuse it any more.
    Running,
    /// An earlier runner of this goal died (`kill -9`) and left these processes; they are gone.
    LeftoversEnded(&'a [LeftoverProcess]),
    /// Gate processes of killed greenlight runs sharing this lock root (any verify, hook, mcp
    /// or goal run), ended by the sweep every entry point makes before its gates.
    OrphanedGatesEnded(&'a [LeftoverProcess]),
}

/// How a run of a goal ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Driven {
    /// The loop's outcome.
    pub finish: Finish,
    /// For [`Finish::NotActive`]: the pause the goal is in, as `(reason, detail)`, when some
    /// other process paused it.
    pub pause: Option<(String, String)>,
}

/// Runs `goal` until it is done or paused: one runner per goal (a second is refused with
/// [`Error::AlreadyRunning`]), what an earlier runner left is ended, then the engine runs. Its
/// agent's dispatcher is built by `families`.
pub async fn drive(
    store: &mut Store,
    goal: GoalId,
    options: &DriveOptions,
    families: &dyn Families,
    interrupt: &mut InterruptWatch,
    on_started: &mut dyn FnMut(Started<'_>),
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Driven, Error> {
    let record = store.goal(goal)?.ok_or(Error::NoSuchGoal(goal.0))?;
    let marker = run_marker(store.path(), goal);
    let (agent, family) =
        dispatcher_for(&record.agent, Some(&marker), families).map_err(Error::Agent)?;
    let settings = Settings {
        agent,
        family,
        model: record
            .agent
            .model
            .clone()
            .unwrap_or_else(|| "default".into()),
        judge: record.judge.clone(),
        dispatch_timeout: options.agent_timeout,
        kill_grace: options.kill_grace,
        gate_env: vec![marker.clone()],
        agent_bin: agent_bin(&record.agent),
        agent_search_path: options.agent_search_path.clone(),
        // An agent checked moments ago (just given to the goal) is not probed a second time.
        probe: crate::preflight::probes(family) && !options.agent_checked,
        lock_root: options.lock_root.clone(),
        env: options.env.clone(),
        cache: options.cache.clone(),
        remote: options.remote.clone(),
    };
    let runners = runners_dir(store.path());
    let (guard, broke_stale) =
        match lock::acquire(&runners, &format!("goal-{goal}"), Duration::ZERO, interrupt).await {
            Ok(Acquired::Held {
                guard, broke_stale, ..
            }) => (guard, broke_stale),
            Ok(Acquired::GaveUp { holder, .. }) => {
                return Err(Error::AlreadyRunning {
                    goal: goal.0,
                    holder: holder.map(|h| format!(" (pid {} on {})", h.pid, h.host)),
                });
            }
            Ok(Acquired::Interrupted(signal)) => return Err(Error::Interrupted(signal)),
            Err(source) => {
                return Err(Error::LockRoot {
                    root: runners,
                    source,
                });
            }
        };
    if record.state == GoalState::Paused {
        store.write(|tx| tx.resume_goal(goal))?;
    }
    on_started(Started::Running);
    // We hold the goal's runner lock, so any process still marked with this goal belongs to an
    // earlier runner that died without cleaning up (kill -9): end it before going on.
    let (var, value) = &marker;
    // Taking a dead runner's lock already ended what its run token marks (`lock::acquire`);
    // the marker finds the rest (a process that cleared the token).
    let mut leftovers = broke_stale.map(|stale| stale.ended).unwrap_or_default();
    leftovers.extend(greenlight_proc::sweep_marked(var, value));
    if !leftovers.is_empty() {
        on_started(Started::LeftoversEnded(&leftovers));
    }
    let orphans = greenlight_gate::sweep_orphaned_gates(&settings.lock_root);
    if !orphans.is_empty() {
        on_started(Started::OrphanedGatesEnded(&orphans));
    }
    let finish = Engine::new(store, goal, &settings, on_progress)
        .run(interrupt)
        .await;
    guard.release();
    let finish = finish?;
    let pause = match &finish {
        Finish::NotActive(_) => store
            .goal(goal)
            .ok()
            .flatten()
            .and_then(|g| g.pause)
            .map(|p| (p.reason, p.detail.unwrap_or_default())),
        _ => None,
    };
    Ok(Driven { finish, pause })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_split_on_spaces_and_keep_quoted_words() {
        assert_eq!(
            split_template("my-agent --x 'a b' \"{prompt}\"").ok(),
            Some(vec![
                "my-agent".into(),
                "--x".into(),
                "a b".into(),
                "{prompt}".into()
            ])
        );
        assert!(split_template("agent 'open").is_err());
        assert!(split_template("   ").is_err());
        assert_eq!(
            split_template("a ''").ok(),
            Some(vec!["a".to_owned(), String::new()])
        );
    }

    #[test]
    fn the_parent_chain_is_read_from_proc() {
        assert_eq!(
            parent_of(std::process::id()),
            Some(std::os::unix::process::parent_id())
        );
    }

    #[test]
    fn the_marker_names_the_same_file_the_same_way() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("state.db");
        std::fs::write(&db, "").expect("touch");
        let odd = dir.path().join(".").join("state.db");
        assert_eq!(run_marker(&db, GoalId(3)), run_marker(&odd, GoalId(3)));
        assert_ne!(run_marker(&db, GoalId(3)).1, run_marker(&db, GoalId(4)).1);
    }
}
