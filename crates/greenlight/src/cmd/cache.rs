//! `greenlight cache stats|prune|clear`: the result cache of version 2 gates.

use std::path::PathBuf;

use greenlight_gate::cache::{CacheSettings, DEFAULT_MAX_BYTES, Store};

/// The `cache` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Where the cache is, how many entries it holds and their size.
    Stats {
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        place: Place,
    },
    /// Remove the least recently used entries until the cache is under a size.
    Prune {
        /// The size to get under, in bytes or with a unit (500M, 2G) [default: 2G, the bound
        /// every run keeps].
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        max_size: Option<u64>,
        #[command(flatten)]
        place: Place,
    },
    /// Remove every entry (the next run of each gate runs it).
    Clear {
        #[command(flatten)]
        place: Place,
    },
}

/// Which cache: the one `greenlight verify` with the same `--state` uses.
#[derive(Debug, clap::Args)]
pub struct Place {
    /// The state database whose directory holds the cache key [default: $GREENLIGHT_STATE,
    /// else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, value_name = "PATH")]
    state: Option<PathBuf>,
}

fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, ""), |at| text.split_at(at));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size; write bytes or a number with K, M or G"))?;
    let scale: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        other => return Err(format!("unknown unit `{other}`; use K, M or G")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is too large"))
}

fn open(place: &Place) -> Result<(CacheSettings, Store), String> {
    let settings = greenlight_run::cache_place::cache_settings(
        place.state.as_deref(),
        crate::environment::get(),
    )
    .ok_or("no cache directory: set XDG_CACHE_HOME or HOME (or GREENLIGHT_CACHE_DIR)")?;
    let store = settings.open()?;
    Ok((settings, store))
}

/// Runs the subcommand and returns the process exit code.
pub fn run(command: Command) -> i32 {
    let place = match &command {
        Command::Stats { place, .. } | Command::Prune { place, .. } | Command::Clear { place } => {
            place
        }
    };
    let (_settings, store) = match open(place) {
        Ok(opened) => opened,
        Err(why) => {
            errln!("greenlight: cannot open the result cache: {why}");
            return 1;
        }
    };
    match command {
        Command::Stats { json, .. } => {
            let stats = store.stats();
            if json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&stats).unwrap_or_default()
                );
            } else {
                outln!("cache:   {}", stats.dir.display());
                outln!("entries: {}", stats.entries);
                outln!(
                    "size:    {} of {} ({:.1} %)",
                    human(stats.bytes),
                    human(stats.max_bytes),
                    stats.bytes as f64 * 100.0 / stats.max_bytes.max(1) as f64
                );
            }
            0
        }
        Command::Prune { max_size, .. } => {
            let bound = max_size.unwrap_or(DEFAULT_MAX_BYTES);
            match store.evict(bound) {
                Ok(removed) => {
                    let left = store.stats();
                    outln!(
                        "removed {removed} entr{}; {} left in {}",
                        if removed == 1 { "y" } else { "ies" },
                        left.entries,
                        human(left.bytes)
                    );
                    0
                }
                Err(why) => {
                    errln!("greenlight: {why}");
                    1
                }
            }
        }
        Command::Clear { .. } => match store.clear() {
            Ok(removed) => {
                outln!(
                    "removed {removed} entr{}",
                    if removed == 1 { "y" } else { "ies" }
                );
                0
            }
            Err(why) => {
                errln!("greenlight: {why}");
                1
            }
        },
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_and_without_units() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("2T").unwrap_err().contains("unknown unit"));
        assert!(parse_size("x").unwrap_err().contains("not a size"));
    }
}
