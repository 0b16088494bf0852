//! Where a run's result cache lives: the user's cache directory, and the key that
//! authenticates its entries beside the state database (so one `--state` keeps one key).

use std::path::Path;

use greenlight_gate::cache::CacheSettings;

/// The cache settings of a run whose state database is `state` (default: the usual one).
/// `None` when no directory can be chosen (no HOME), which turns the cache off.
pub fn cache_settings(state: Option<&Path>) -> Option<CacheSettings> {
    let state = match state {
        Some(path) => path.to_path_buf(),
        None => greenlight_store::default_state_path().ok()?,
    };
    let state_dir = state.parent()?.to_path_buf();
    CacheSettings::locate(|name| std::env::var_os(name), &state_dir)
}
