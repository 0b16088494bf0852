//! What a build without one of the binary's optional features says when asked for what it left
//! out: the feature's name and the command that installs a build with it, in one sentence.
//!
//! Every left-out backend refuses through [`Feature::refusal`], so the wording is the same
//! wherever it is met (a verify.yaml's cluster, `greenlight worker`, `--agent openai`,
//! `greenlight mcp`).

// A full build (every feature on) meets no left-out backend, so nothing calls these there.
#![cfg_attr(
    all(feature = "remote", feature = "openai", feature = "mcp"),
    allow(dead_code)
)]

/// One optional feature of the `greenlight` crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    /// The cargo feature's name.
    pub name: &'static str,
    /// What it brings, as a user would ask for it.
    pub brings: &'static str,
}

/// Remote execution: `options.remote` clusters and `greenlight worker`.
pub const REMOTE: Feature = Feature {
    name: "remote",
    brings: "remote execution",
};

/// The MCP server: `greenlight mcp` and `/mcp` under `greenlight serve`.
pub const MCP: Feature = Feature {
    name: "mcp",
    brings: "the MCP server",
};

/// The `--agent openai` family.
pub const OPENAI: Feature = Feature {
    name: "openai",
    brings: "the openai agent family",
};

impl Feature {
    /// Why `asked` cannot run in this build, and how to get a build where it can.
    pub fn refusal(self, asked: &str) -> String {
        format!(
            "{asked} needs {} (the `{}` feature), which this greenlight was built without; \
             install a build with it: cargo install --locked --path crates/greenlight --features {} \
             (the default build has every feature)",
            self.brings, self.name, self.name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refusal names what was asked, the feature, and the command that brings it back.
    #[test]
    fn a_refusal_names_the_feature_and_the_install_command() {
        assert_eq!(
            REMOTE.refusal("greenlight worker"),
            "greenlight worker needs remote execution (the `remote` feature), which this \
             greenlight was built without; install a build with it: cargo install --locked \
             --path crates/greenlight --features remote (the default build has every feature)"
        );
        let openai = OPENAI.refusal("--agent openai");
        assert!(
            openai
                .starts_with("--agent openai needs the openai agent family (the `openai` feature)"),
            "{openai}"
        );
        assert!(openai.contains("--features openai "), "{openai}");
    }
}
