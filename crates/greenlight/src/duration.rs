//! The one reader of durations on the command line (`--agent-timeout`, `--gate-timeout`,
//! `agent --timeout`, …): `1500ms`, `300s`, `5m`, `2h`, or a bare number of seconds.
//!
//! A duration must be positive (a zero deadline fires before anything starts) and fit in
//! `u64` seconds: `5000000000000000h` is refused, never wrapped into something short.

use std::time::Duration;

/// The longest duration accepted: ten years.
const MAX: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// Parses a duration as the command line writes it.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration; write e.g. 1500ms, 300s, 5m or 2h"))?;
    let too_long = || format!("`{text}` is too long a duration; write at most a few years");
    let duration = match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60).ok_or_else(too_long)?),
        "h" => Duration::from_secs(n.checked_mul(3600).ok_or_else(too_long)?),
        other => {
            return Err(format!(
                "`{text}`: unknown unit `{other}`; use ms, s, m or h"
            ));
        }
    };
    // Far beyond any run, and far below what a clock's `Instant` can add without overflow.
    if duration > MAX {
        return Err(too_long());
    }
    if duration.is_zero() {
        return Err(format!("`{text}` is zero; a time limit must be positive"));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("300s"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration(" 90 "), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["5 min", "", "m", "-5s", "1.5h", "0", "0ms"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }

    /// `goal run --gate-timeout 5124095576030432h` multiplied into a u64 overflow (a panic in a
    /// debug build, a short wrapped limit in release).
    #[test]
    fn a_duration_too_long_for_u64_seconds_is_refused_not_wrapped() {
        let hours = u64::MAX / 3600 + 1;
        let err = parse_duration(&format!("{hours}h")).expect_err("overflow");
        assert!(err.contains("too long"), "{err}");
        let minutes = u64::MAX / 60 + 1;
        assert!(parse_duration(&format!("{minutes}m")).is_err());
        // What fits a u64 but not a clock (an `Instant` plus it would overflow) is refused too.
        assert!(parse_duration(&format!("{}h", u64::MAX / 3600)).is_err());
        assert!(parse_duration(&format!("{}s", u64::MAX)).is_err());
        // Ten years is the longest limit; a day past it is refused.
        assert_eq!(parse_duration(&format!("{}h", 10 * 366 * 24)), Ok(MAX));
        assert!(parse_duration(&format!("{}h", 10 * 366 * 24 + 24)).is_err());
    }
}
