//! Where a run's result cache lives: the user's cache directory, and the key that
//! authenticates its entries beside the state database (so one `--state` keeps one key).

use std::path::Path;

use greenlight_gate::cache::CacheSettings;

use crate::RunEnv;

/// The cache settings of a run whose state database is `state` (`None`: the environment's
/// default), in the environment `env`. `None` when no directory can be chosen (no HOME), which
/// turns the cache off.
pub fn cache_settings(state: Option<&Path>, env: &RunEnv) -> Option<CacheSettings> {
    let state = env.state_path(state).ok()?;
    let state_dir = greenlight_store::local_anchor(&state)
        .parent()?
        .to_path_buf();
    CacheSettings::locate(|name| env.vars.var(name), &state_dir)
}
