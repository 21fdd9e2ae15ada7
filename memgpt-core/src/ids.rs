//! Typed identifiers.
//!
//! Every id is a UUIDv7 wrapped in its own newtype, so an [`AgentId`] can never be passed where a
//! [`MessageId`] is expected. UUIDv7 ids sort by creation time, which keeps B-tree indexes in the
//! SQL backends append-mostly.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! typed_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new, time-ordered (UUIDv7) id.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// Wraps an existing UUID (for example one read back from a database).
            pub const fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// The underlying UUID.
            pub const fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(uuid: Uuid) -> Self {
                Self(uuid)
            }
        }
    };
}

typed_id!(
    /// Identifies one agent: its memory blocks, its queue, its recall and archival storage.
    AgentId
);
typed_id!(
    /// Identifies one message in recall storage.
    MessageId
);
typed_id!(
    /// Identifies one passage in archival storage.
    PassageId
);
typed_id!(
    /// Identifies one shared memory block (see [`SharedBlock`](crate::store::SharedBlock)).
    BlockId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_strings_and_json() {
        let id = MessageId::new();
        let parsed: MessageId = id.to_string().parse().unwrap();
        assert_eq!(id, parsed);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<MessageId>(&json).unwrap(), id);
    }

    #[test]
    fn ids_are_time_ordered() {
        let a = PassageId::new();
        let b = PassageId::new();
        assert!(a < b);
    }
}
