//! Eviction policies by name: every policy registered with
//! [`register_policy!`](crate::register_policy), built-in or user-defined, resolves from the
//! name an agent's config stores.

use std::fmt;
use std::sync::Arc;

use linkme::distributed_slice;

use super::EvictionPolicy;

/// One policy registered with [`register_policy!`](crate::register_policy): its name and how
/// to make it.
pub struct PolicyRegistration {
    /// The name agent configs use ([`AgentConfig::policy`](crate::AgentConfig::policy)).
    pub name: &'static str,
    /// Where it was registered (`module_path!()`), for duplicate-name errors.
    pub module_path: &'static str,
    /// Makes the policy with its default settings.
    pub build: fn() -> Arc<dyn EvictionPolicy>,
}

impl fmt::Debug for PolicyRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyRegistration")
            .field("name", &self.name)
            .field("module_path", &self.module_path)
            .finish_non_exhaustive()
    }
}

/// Every policy registered with [`register_policy!`](crate::register_policy) in the linked
/// binary.
#[distributed_slice]
pub static POLICIES: [PolicyRegistration];

/// Why a policy name did not resolve.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// No policy is registered under the name.
    #[error(
        "unknown eviction policy `{name}`: the registered ones are {}; register yours with \
         memgpt_core::register_policy! (and make sure its crate is linked) or give the object \
         to AgentBuilder::policy",
        known.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    )]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, sorted.
        known: Vec<&'static str>,
    },
    /// Two registrations share the name.
    #[error("eviction policy `{name}` is registered twice: in {first} and in {second}")]
    Duplicate {
        /// The name.
        name: String,
        /// Where the first registration is.
        first: &'static str,
        /// Where the second is.
        second: &'static str,
    },
    /// The registered policy reports another name than it was registered under.
    #[error(
        "eviction policy registered as `{registered}` (in {module_path}) calls itself `{reported}`"
    )]
    NameMismatch {
        /// The registered name.
        registered: &'static str,
        /// What its `name()` returns.
        reported: String,
        /// Where it was registered.
        module_path: &'static str,
    },
}

/// The names of every registered policy, sorted.
///
/// ```
/// let names = memgpt_core::queue::policy_names();
/// assert!(names.contains(&"paper") && names.contains(&"lru") && names.contains(&"attention"));
/// ```
pub fn policy_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = POLICIES.iter().map(|r| r.name).collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Makes the policy registered under `name` (built-in ones: `paper`, `lru`, `attention`, `salience`).
///
/// ```
/// use memgpt_core::queue::{PolicyError, policy_by_name};
///
/// assert_eq!(policy_by_name("lru").unwrap().name(), "lru");
/// assert!(matches!(policy_by_name("clock"), Err(PolicyError::Unknown { .. })));
/// ```
pub fn policy_by_name(name: &str) -> Result<Arc<dyn EvictionPolicy>, PolicyError> {
    let mut found = POLICIES.iter().filter(|r| r.name == name);
    let Some(registration) = found.next() else {
        return Err(PolicyError::Unknown {
            name: name.to_owned(),
            known: policy_names(),
        });
    };
    if let Some(second) = found.next() {
        return Err(PolicyError::Duplicate {
            name: name.to_owned(),
            first: registration.module_path,
            second: second.module_path,
        });
    }
    let policy = (registration.build)();
    if policy.name() != registration.name {
        return Err(PolicyError::NameMismatch {
            registered: registration.name,
            reported: policy.name().to_owned(),
            module_path: registration.module_path,
        });
    }
    Ok(policy)
}

/// Registers an eviction policy under a name, so agents whose config names it resolve it on
/// load (no need to pass the object to every [`AgentBuilder`](crate::AgentBuilder)). The
/// expression makes the policy; its [`EvictionPolicy::name`] must be the registered name.
///
/// Registration is link-time (like functions): the crate that registers must be linked into
/// the binary, so name something from it (`use my_policies as _;` is enough).
///
/// ```
/// use memgpt_core::queue::{ContextUsage, EvictionPolicy, PaperPolicy, Pressure, QueueView};
///
/// /// Evicts the newest half instead of the oldest.
/// #[derive(Debug, Default)]
/// struct Newest(PaperPolicy);
///
/// impl EvictionPolicy for Newest {
///     fn name(&self) -> &str {
///         "newest"
///     }
///     fn pressure(&self, usage: &ContextUsage) -> Pressure {
///         self.0.pressure(usage)
///     }
///     fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
///         (view.entries.len() / 2..view.entries.len()).collect()
///     }
/// }
///
/// memgpt_core::register_policy!("newest", Newest::default());
///
/// assert_eq!(memgpt_core::queue::policy_by_name("newest").unwrap().name(), "newest");
/// ```
#[macro_export]
macro_rules! register_policy {
    ($name:expr, $make:expr $(,)?) => {
        const _: () = {
            fn __memgpt_make_policy() -> ::std::sync::Arc<dyn $crate::queue::EvictionPolicy> {
                ::std::sync::Arc::new($make)
            }

            #[$crate::__private::linkme::distributed_slice($crate::queue::POLICIES)]
            #[linkme(crate = $crate::__private::linkme)]
            static __MEMGPT_POLICY: $crate::queue::PolicyRegistration =
                $crate::queue::PolicyRegistration {
                    name: $name,
                    module_path: ::std::module_path!(),
                    build: __memgpt_make_policy,
                };
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_policies_resolve_by_their_own_names() {
        for name in ["paper", "lru", "attention"] {
            assert_eq!(policy_by_name(name).unwrap().name(), name);
        }
        for name in policy_names() {
            policy_by_name(name).unwrap();
        }
        let err = policy_by_name("clock").unwrap_err();
        assert!(
            err.to_string().contains("`attention`, `lru`, `paper`"),
            "{err}"
        );
    }
}
