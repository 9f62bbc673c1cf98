//! Typed ids of characters and sessions. A front door parses the id it was given once, at the
//! edge; engine methods take the typed id and never look a malformed one up (a malformed id
//! could otherwise be read as a key prefix). The text is the id as the engine issues it (a
//! UUID), so stored records and API bodies are unchanged.

use super::error::{Error, not_found};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $missing:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// A fresh id.
            pub fn new() -> $name {
                $name(uuid::Uuid::new_v4().to_string())
            }

            /// The id in `s`; a malformed one is not found, as an unknown one is.
            pub fn parse(s: &str) -> Result<$name, Error> {
                if super::is_id(s) {
                    Ok($name(s.to_string()))
                } else {
                    Err(not_found($missing))
                }
            }

            /// The id of a stored record, which the engine issued (and so need not check).
            pub(crate) fn of_record(s: &str) -> $name {
                $name(s.to_string())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> $name {
                $name::new()
            }
        }

        /// Read as the string it is wherever the store or a key wants one.
        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        /// Written as the plain string, as the `String` ids before it were.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        /// Read from a string that must be a well-formed id.
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let s = String::deserialize(d)?;
                if super::is_id(&s) {
                    Ok($name(s))
                } else {
                    Err(serde::de::Error::custom($missing))
                }
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

id_type!(
    /// The id of a character.
    CharacterId,
    "no such character"
);

id_type!(
    /// The id of a session (a visit).
    SessionId,
    "no such session"
);
