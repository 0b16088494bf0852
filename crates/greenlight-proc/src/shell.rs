//! Reading a one-line shell command closely enough to tell what it runs: its segments, each
//! segment's words, the program a word names.
//!
//! The one rule: quotes are honoured and nothing is expanded. This is for telling what a command
//! runs (the drafter's classification, an installer recognising its own hook handler), never for
//! running it: a command always runs through `sh -c` as written.

/// Splits a one-line command into segments at `&&`, `||`, `;`, `|` and `&`, outside quotes.
pub fn segments(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
                current.push(c);
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    current.push(c);
                }
                '&' | '|' | ';' => {
                    if matches!(chars.peek(), Some(&n) if n == c) {
                        chars.next();
                    }
                    let seg = current.trim();
                    if !seg.is_empty() {
                        out.push(seg.to_string());
                    }
                    current.clear();
                }
                _ => current.push(c),
            },
        }
    }
    let seg = current.trim();
    if !seg.is_empty() {
        out.push(seg.to_string());
    }
    out
}

/// The words of one segment with quotes removed; leading `NAME=value` assignments dropped.
pub fn words(segment: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in segment.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            None => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(current);
    }
    let first_real = out
        .iter()
        .position(|w| !is_assignment(w))
        .unwrap_or(out.len());
    out.split_off(first_real)
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The basename of a program word (`./node_modules/.bin/jest` → `jest`).
pub fn program(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_separators_do_not_split() {
        assert_eq!(
            segments("pytest -k 'a && b' | tee x"),
            vec!["pytest -k 'a && b'", "tee x"]
        );
        assert_eq!(
            words("A=1 pytest -k \"not slow\""),
            vec!["pytest", "-k", "not slow"]
        );
    }

    #[test]
    fn a_program_is_its_basename() {
        assert_eq!(program("./node_modules/.bin/jest"), "jest");
        assert_eq!(program("cargo"), "cargo");
    }
}
