//! The scope of a gate's command line: one command, several, or something nobody can see into.
//!
//! One rule: `simple` and `compound` are said only of text whose every character is understood
//! without running a shell (words, quotes, the separators `&&`, `||`, `;`, `|` and newlines);
//! anything else (substitutions, redirections, groups, control flow, comments) is `unknown`.

use crate::model::Scope;

/// The scope of `command`, as `sh -c` would run it.
pub fn scope_of(command: &str) -> Scope {
    let mut commands = 0usize;
    // Whether the current command has a word yet, and whether its first word was seen.
    let mut words_in_command = 0usize;
    let mut in_word = false;
    let mut word = String::new();
    let mut chars = command.chars().peekable();
    let mut quote: Option<char> = None;
    let end_word = |word: &mut String, words: &mut usize| -> bool {
        // Control-flow keywords in command position: the text is a program, not a list.
        let keyword = *words == 0
            && matches!(
                word.as_str(),
                "if" | "then"
                    | "else"
                    | "elif"
                    | "fi"
                    | "for"
                    | "while"
                    | "until"
                    | "do"
                    | "done"
                    | "case"
                    | "esac"
                    | "function"
                    | "!"
            );
        *words += 1;
        word.clear();
        !keyword
    };
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            match c {
                _ if c == q => quote = None,
                '$' | '`' if q == '"' => return Scope::Unknown,
                '\\' if q == '"' => {
                    chars.next();
                }
                _ => {}
            }
            word.push(c);
            continue;
        }
        let separator = match c {
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                true
            }
            '|' => {
                if chars.peek() == Some(&'|') {
                    chars.next();
                }
                true
            }
            ';' | '\n' => true,
            _ => false,
        };
        if separator || c == ' ' || c == '\t' {
            if in_word && !end_word(&mut word, &mut words_in_command) {
                return Scope::Unknown;
            }
            in_word = false;
            if separator {
                if words_in_command == 0 {
                    // `a && && b`, a leading `;`: not a list this reading vouches for. A
                    // trailing newline or `;` ends the last command and is fine.
                    if c == '\n' || c == ';' {
                        continue;
                    }
                    return Scope::Unknown;
                }
                commands += 1;
                words_in_command = 0;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '\\' => {
                chars.next();
            }
            '$' | '`' | '<' | '>' | '(' | ')' | '{' | '}' | '&' | '#' | '*' | '?' | '[' => {
                return Scope::Unknown;
            }
            _ => {}
        }
        in_word = true;
        word.push(c);
    }
    if quote.is_some() {
        return Scope::Unknown;
    }
    if in_word && !end_word(&mut word, &mut words_in_command) {
        return Scope::Unknown;
    }
    if words_in_command > 0 {
        commands += 1;
    }
    match commands {
        0 => Scope::Unknown,
        1 => Scope::Simple,
        _ => Scope::Compound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes() {
        for (command, scope) in [
            ("pytest -q", Scope::Simple),
            ("npm test", Scope::Simple),
            ("RUST_BACKTRACE=0 cargo test", Scope::Simple),
            ("pytest -k 'a and b'", Scope::Simple),
            ("ruff check . && mypy . && pytest", Scope::Compound),
            ("pytest a; pytest b", Scope::Compound),
            ("pytest a\npytest b\n", Scope::Compound),
            ("cargo test | tee log", Scope::Compound),
            ("pytest || true", Scope::Compound),
            ("pytest 2>&1", Scope::Unknown),
            ("pytest $ARGS", Scope::Unknown),
            ("echo \"$(date)\"", Scope::Unknown),
            ("if true; then pytest; fi", Scope::Unknown),
            ("(cd a && pytest)", Scope::Unknown),
            ("pytest &", Scope::Unknown),
            ("pytest 'unclosed", Scope::Unknown),
            ("&& pytest", Scope::Unknown),
            ("", Scope::Unknown),
            ("pytest tests/*.py", Scope::Unknown),
        ] {
            assert_eq!(scope_of(command), scope, "{command:?}");
        }
    }
}
