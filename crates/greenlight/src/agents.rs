//! Every agent family in one place: the openai settings a user gives, checked, and the
//! dispatcher of any family, built.
//!
//! The seam (`greenlight-agent`, which holds claude, codex and command) and the goal loop never
//! name the openai family (`greenlight-openai`, with its HTTP client): the goal loop is handed
//! [`EveryFamily`] as its [`Families`], and `greenlight agent` uses the same value, so a family
//! is wired in here once. The environment an agent starts from is the one the process started
//! with (`crate::environment`). A build without the `openai` feature refuses the openai family
//! here, naming the feature.

use std::ffi::OsString;

use greenlight_agent::{AdapterOptions, Dispatcher, Family, cli_dispatcher};
use greenlight_goal::drive::{Families, OpenAiArgs};
#[cfg(feature = "openai")]
use greenlight_openai::adapter::DEFAULT_API_KEY_ENV;
#[cfg(feature = "openai")]
use greenlight_openai::{Endpoint, OpenAi, ToolFormat};
use greenlight_store::AgentEndpoint;

/// The four families, with this process's environment as every dispatcher's base.
#[derive(Debug, Clone)]
pub struct EveryFamily {
    env: Vec<(OsString, OsString)>,
}

impl EveryFamily {
    /// The families, with the environment this process started with.
    pub fn from_process_env() -> Self {
        Self::with_env(&crate::environment::get().vars)
    }

    /// The families, with `env` as every dispatcher's base.
    pub fn with_env(env: &greenlight_proc::ProcessEnv) -> Self {
        Self {
            env: env
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    }
}

/// Whether `name` can be an environment variable's name: `[A-Za-z_][A-Za-z0-9_]*`.
#[cfg(feature = "openai")]
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Families for EveryFamily {
    fn environment(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    #[cfg(not(feature = "openai"))]
    fn openai_endpoint(&self, _: &OpenAiArgs) -> Result<AgentEndpoint, String> {
        Err(crate::left_out::OPENAI.refusal("--agent openai"))
    }

    #[cfg(feature = "openai")]
    fn openai_endpoint(&self, args: &OpenAiArgs) -> Result<AgentEndpoint, String> {
        let base_url = args.base_url.clone().ok_or(
            "--agent openai needs --base-url (the server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1)",
        )?;
        greenlight_openai::client::completions_url(&base_url)?;
        let api_key_env = args
            .api_key_env
            .clone()
            .unwrap_or_else(|| DEFAULT_API_KEY_ENV.to_owned());
        if !is_env_name(&api_key_env) {
            return Err(format!(
                "--api-key-env `{api_key_env}` is not a variable name; pass the NAME of the variable that holds the key (e.g. OPENAI_API_KEY), never the key"
            ));
        }
        let tool_format: ToolFormat = args
            .tool_format
            .as_deref()
            .unwrap_or("auto")
            .parse()
            .map_err(|e: String| format!("--tool-format: {e}"))?;
        Ok(AgentEndpoint {
            base_url,
            api_key_env,
            tool_format: tool_format.as_str().to_owned(),
        })
    }

    fn dispatcher(
        &self,
        family: Family,
        mut options: AdapterOptions,
        endpoint: Option<&AgentEndpoint>,
    ) -> Result<Box<dyn Dispatcher>, String> {
        if options.base_env.is_none() {
            options.base_env = Some(self.environment().to_vec());
        }
        if family != Family::OpenAi {
            return cli_dispatcher(family, options).map_err(|e| e.to_string());
        }
        self.openai_dispatcher(options, endpoint)
    }
}

impl EveryFamily {
    /// In a build without the `openai` feature: the refusal.
    #[cfg(not(feature = "openai"))]
    fn openai_dispatcher(
        &self,
        _: AdapterOptions,
        _: Option<&AgentEndpoint>,
    ) -> Result<Box<dyn Dispatcher>, String> {
        Err(crate::left_out::OPENAI.refusal("the openai family"))
    }

    /// The openai family's dispatcher, from the endpoint the goal or the flags gave.
    #[cfg(feature = "openai")]
    fn openai_dispatcher(
        &self,
        options: AdapterOptions,
        endpoint: Option<&AgentEndpoint>,
    ) -> Result<Box<dyn Dispatcher>, String> {
        let stored =
            endpoint.ok_or_else(|| greenlight_openai::Error::EndpointMissing.to_string())?;
        let mut endpoint = Endpoint::new(stored.base_url.clone());
        endpoint.api_key_env = stored.api_key_env.clone();
        endpoint.tool_format = stored.tool_format.parse()?;
        let openai = OpenAi::new(options, endpoint).map_err(|e| e.to_string())?;
        Ok(Box::new(openai))
    }
}

#[cfg(all(test, feature = "openai"))]
mod tests {
    use greenlight_goal::drive::{agent_bin, dispatcher_for, parse_agent};

    use super::*;

    #[test]
    fn openai_settings_are_checked_and_stored_without_the_key() {
        let families = EveryFamily::from_process_env();
        let args = OpenAiArgs {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            api_key_env: Some("LOCAL_KEY".into()),
            tool_format: Some("tags".into()),
        };
        let spec =
            parse_agent("openai", Some("qwen2.5-coder:7b".into()), &args, &families).expect("ok");
        assert_eq!(spec.family.as_str(), "openai");
        assert_eq!(
            spec.endpoint,
            Some(AgentEndpoint {
                base_url: "http://127.0.0.1:8080/v1".into(),
                api_key_env: "LOCAL_KEY".into(),
                tool_format: "tags".into(),
            })
        );
        assert_eq!(agent_bin(&spec), None);
        let (d, family) = dispatcher_for(&spec, None, &families).expect("builds");
        assert_eq!((d.family(), family), (Family::OpenAi, Family::OpenAi));
        let default = parse_agent(
            "openai",
            Some("m".into()),
            &OpenAiArgs {
                base_url: Some("http://h/v1".into()),
                ..OpenAiArgs::default()
            },
            &families,
        )
        .expect("defaults");
        let ep = default.endpoint.expect("endpoint");
        assert_eq!(
            (ep.api_key_env.as_str(), ep.tool_format.as_str()),
            ("OPENAI_API_KEY", "auto")
        );

        let err = |agent: &str, model: Option<&str>, args: &OpenAiArgs| {
            parse_agent(agent, model.map(str::to_owned), args, &families).expect_err("refused")
        };
        assert!(err("openai", Some("m"), &OpenAiArgs::default()).contains("--base-url"));
        assert!(err("openai", None, &args).contains("--model"));
        assert!(err("claude", None, &args).contains("for --agent openai"));
        let key = OpenAiArgs {
            api_key_env: Some("sk-abc123".into()),
            ..args.clone()
        };
        assert!(err("openai", Some("m"), &key).contains("never the key"));
        let format = OpenAiArgs {
            tool_format: Some("xml".into()),
            ..args.clone()
        };
        assert!(err("openai", Some("m"), &format).contains("--tool-format"));
        let url = OpenAiArgs {
            base_url: Some("localhost:8080".into()),
            ..args
        };
        assert!(err("openai", Some("m"), &url).contains("http://"));
    }

    /// The openai family without a server is refused by the code that chooses a family, with the
    /// flag to pass; the agent-CLI families build from the same call.
    #[test]
    fn every_family_builds_here_and_openai_needs_its_server() {
        let families = EveryFamily::from_process_env();
        let err = families
            .dispatcher(Family::OpenAi, AdapterOptions::default(), None)
            .err()
            .expect("refused");
        assert!(err.contains("--base-url"), "{err}");
        for family in [Family::Claude, Family::Codex] {
            let d = families
                .dispatcher(family, AdapterOptions::default(), None)
                .expect("builds");
            assert_eq!(d.family(), family);
        }
        let err = families
            .dispatcher(Family::Command, AdapterOptions::default(), None)
            .err()
            .expect("refused");
        assert!(err.contains("--bin"), "{err}");
    }
}
