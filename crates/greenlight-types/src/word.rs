//! How a word is declared: one macro gives every closed set the same text form, so `as_str`,
//! `FromStr`, `Display` and serde can never disagree about a spelling.

use std::fmt;

/// A text that names no member of a word's closed set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownWord {
    /// Which word was being read (`agent family`, `gate verdict`, …).
    pub what: &'static str,
    /// The text that was found.
    pub found: String,
    /// Every spelling the word accepts, in declaration order.
    pub expected: &'static [&'static str],
}

impl fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} `{}`; use ", self.what, self.found)?;
        let last = self.expected.len().saturating_sub(1);
        for (i, name) in self.expected.iter().enumerate() {
            let sep = match i {
                0 => "",
                i if i == last => " or ",
                _ => ", ",
            };
            write!(f, "{sep}{name}")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownWord {}

/// Declares a closed word: the enum (serde and JSON Schema spelling each member exactly as
/// stored), `ALL`, `as_str`, `from_name`, `FromStr` and `Display`.
macro_rules! word {
    (
        $(#[$doc:meta])*
        $name:ident ($what:literal) {
            $( $(#[$vdoc:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
        pub enum $name {
            $( $(#[$vdoc])* #[serde(rename = $text)] $variant ),+
        }

        impl $name {
            /// Every member, in declaration order.
            pub const ALL: [$name; { [$($text),+].len() }] = [$($name::$variant),+];

            /// Every spelling, in declaration order.
            pub const NAMES: [&'static str; { [$($text),+].len() }] = [$($text),+];

            /// The name as stored, serialised and shown.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The member named `text`; `None` for anything not in the list.
            pub fn from_name(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::UnknownWord;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::from_name(s).ok_or_else(|| $crate::UnknownWord {
                    what: $what,
                    found: s.to_owned(),
                    expected: &$name::NAMES,
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use word;
