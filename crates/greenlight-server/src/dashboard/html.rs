//! HTML building blocks: escaping, the page layout, badges, times and durations.
//!
//! Everything a page shows from the store (goal text, commands, worktrees, agent output) is
//! untrusted: it reaches the page only through [`esc`], inside double-quoted attributes or text.
//! Nothing from the store is ever put inside a `<script>` or `<style>` element.

use std::fmt::{self, Write as _};

/// Text made safe for HTML text and double-quoted attribute values.
pub struct Esc<'a>(pub &'a str);

/// Escapes `text` for HTML (text or a double-quoted attribute): `& < > " '`.
pub fn esc(text: &str) -> Esc<'_> {
    Esc(text)
}

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// A CSS class token from a stored word (`failed`, `no-progress`): anything but `a-z0-9-`
/// becomes `-`, so a hostile state name can neither leave the attribute nor add classes.
pub fn token(word: &str) -> String {
    word.chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect()
}

/// A status badge: `<span class="badge b-<word>">word</span>`.
pub fn badge(word: &str) -> String {
    format!(
        r#"<span class="badge b-{}">{}</span>"#,
        token(word),
        esc(word)
    )
}

/// The page around `main`: the stylesheet, the header with the connection pill, the resync
/// banner, and the script. `body_attrs` are `data-*` hooks the script reads; their values are
/// escaped here.
pub fn layout(title: &str, body_attrs: &[(&str, String)], main: &str) -> String {
    let mut out = String::with_capacity(main.len() + 2048);
    out.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // Defence in depth beside the escaping: no inline script, no third-party anything.
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'self'; \
         script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
         base-uri 'none'; form-action 'self'; object-src 'none'\">\n",
    );
    let _ = writeln!(out, "<title>{} · greenlight</title>", esc(title));
    out.push_str("<link rel=\"stylesheet\" href=\"/assets/style.css\">\n</head>\n<body");
    for (name, value) in body_attrs {
        let _ = write!(out, " data-{}=\"{}\"", token(name), esc(value));
    }
    out.push_str(">\n<header class=\"top\">\n<a class=\"brand\" href=\"/\">greenlight</a>\n");
    out.push_str(
        "<span id=\"pill\" class=\"pill\" data-state=\"offline\" title=\"connection\">\
         not connected</span>\n</header>\n",
    );
    out.push_str(
        "<div id=\"banner\" class=\"banner\" role=\"alert\" hidden>\
         <strong>Resync needed:</strong> <span id=\"banner-text\">this page missed frames \
         the server no longer holds.</span> <a id=\"banner-reload\" href=\"\">Reload</a></div>\n",
    );
    out.push_str("<main>\n");
    out.push_str(main);
    out.push_str("</main>\n<script src=\"/assets/app.js\" defer></script>\n</body>\n</html>\n");
    out
}

/// `ms` since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (the script rewrites it in local time).
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A `<time>` element for `ms`, which the script shows in local time.
pub fn time(ms: i64) -> String {
    format!(r#"<time datetime="{ms}" data-ms="{ms}">{}</time>"#, utc(ms))
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A wall time for people: `850 ms`, `12.3 s`, `4m 05s`, `2h 03m`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m {:02}s", ms / 60_000, ms % 60_000 / 1000)
    } else {
        format!("{}h {:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000)
    }
}

/// A live-ticking elapsed time: from `from` to `to`, or to now (ticking) when `to` is `None`.
pub fn elapsed(from: i64, to: Option<i64>, now: i64) -> String {
    match to {
        Some(to) => format!(
            r#"<span class="elapsed" data-from="{from}" data-to="{to}">{}</span>"#,
            duration(to - from)
        ),
        None => format!(
            r#"<span class="elapsed" data-from="{from}">{}</span>"#,
            duration(now - from)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_character_that_can_leave_text_or_an_attribute() {
        assert_eq!(
            esc(r#"<script>alert("x" + 'y') & co</script>"#).to_string(),
            "&lt;script&gt;alert(&quot;x&quot; + &#39;y&#39;) &amp; co&lt;/script&gt;"
        );
        assert_eq!(esc("plain ünïcode").to_string(), "plain ünïcode");
        assert_eq!(esc("").to_string(), "");
    }

    #[test]
    fn a_token_cannot_add_a_class_or_leave_its_attribute() {
        assert_eq!(token("no-progress"), "no-progress");
        assert_eq!(token("Fail"), "fail");
        assert_eq!(token("x\" onload=\"y z"), "x--onload--y-z");
    }

    #[test]
    fn utc_dates_match_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000_123), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(-1000), "1969-12-31 23:59:59 UTC");
    }

    #[test]
    fn durations_read_at_every_scale() {
        assert_eq!(duration(-5), "0 ms");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_345), "12.3 s");
        assert_eq!(duration(245_000), "4m 05s");
        assert_eq!(duration(7_380_000), "2h 03m");
    }

    #[test]
    fn the_layout_escapes_the_title_and_hook_values() {
        let page = layout(
            "<b>x</b>",
            &[("stream", "\"><script>".to_owned())],
            "<p>main</p>",
        );
        assert!(page.contains("<title>&lt;b&gt;x&lt;/b&gt; · greenlight</title>"));
        assert!(page.contains(r#"data-stream="&quot;&gt;&lt;script&gt;""#));
        assert!(page.contains("<p>main</p>"));
        assert!(page.contains(r#"<script src="/assets/app.js" defer></script>"#));
        assert_eq!(page.matches("<script").count(), 1);
    }
}
