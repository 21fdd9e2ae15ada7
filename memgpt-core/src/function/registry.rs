//! [`FunctionRegistry`]: functions by name (those linked with `#[memgpt_fn]` and run-time
//! ones), and an agent's [`FunctionSet`].

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use super::{FUNCTIONS, Function};
use crate::llm::ToolSchema;

/// Why a function could not be registered or looked up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two functions share a name.
    #[error("two functions are named `{name}`: one in {first}, one in {second}")]
    DuplicateName {
        /// The name.
        name: String,
        /// Where the first was defined.
        first: String,
        /// Where the second was defined.
        second: String,
    },
    /// A function set names a function nobody registered.
    #[error(
        "no function named `{name}` is registered (is the crate defining it linked? see memgpt::function); \
         registered: {}",
        available.join(", ")
    )]
    UnknownFunction {
        /// The name asked for.
        name: String,
        /// The names that exist.
        available: Vec<String>,
    },
    /// A name the chat APIs would reject.
    #[error("invalid function name `{0}`: use 1 to 64 letters, digits, `_` or `-`")]
    InvalidName(String),
    /// A parameters schema that is not a JSON object schema.
    #[error("function `{name}` has an invalid parameters schema: {reason}")]
    InvalidSchema {
        /// The function.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// A registered function with its schema, computed once.
#[derive(Clone, Debug)]
pub struct RegisteredFunction {
    /// The function.
    pub function: Arc<dyn Function>,
    /// Its schema as sent to the LLM.
    pub schema: ToolSchema,
}

/// All functions an agent could be given, by name.
///
/// [`FunctionRegistry::linked`] holds every `#[memgpt_fn]` in the binary; add run-time
/// functions with [`FunctionRegistry::register`]. Cloning is cheap.
#[derive(Clone, Debug, Default)]
pub struct FunctionRegistry {
    functions: Arc<BTreeMap<String, RegisteredFunction>>,
}

impl FunctionRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every function registered with `#[memgpt_fn]` in the linked binary (computed once).
    pub fn linked() -> Result<Self, RegistryError> {
        static LINKED: OnceLock<Result<FunctionRegistry, RegistryError>> = OnceLock::new();
        LINKED
            .get_or_init(|| {
                let mut registry = FunctionRegistry::new();
                for def in FUNCTIONS.iter() {
                    registry.insert(Arc::new(def))?;
                }
                Ok(registry)
            })
            .clone()
    }

    /// Adds a function. Fails if the name is taken or invalid, or its schema is not an object.
    pub fn register(&mut self, function: impl Function + 'static) -> Result<(), RegistryError> {
        self.insert(Arc::new(function))
    }

    fn insert(&mut self, function: Arc<dyn Function>) -> Result<(), RegistryError> {
        let name = function.name().to_owned();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(RegistryError::InvalidName(name));
        }
        if let Some(existing) = self.functions.get(&name) {
            return Err(RegistryError::DuplicateName {
                name,
                first: existing.function.origin().to_owned(),
                second: function.origin().to_owned(),
            });
        }
        let parameters = function.parameters();
        if parameters.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err(RegistryError::InvalidSchema {
                name,
                reason: "it must be a JSON schema of type \"object\"".into(),
            });
        }
        let schema = ToolSchema {
            name: name.clone(),
            description: function.description().to_owned(),
            parameters,
        };
        Arc::make_mut(&mut self.functions).insert(name, RegisteredFunction { function, schema });
        Ok(())
    }

    /// The function called `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredFunction> {
        self.functions.get(name)
    }

    /// Every registered name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.functions.keys().map(String::as_str)
    }

    /// The functions called `names`, in that order. Unknown names are an error.
    pub fn function_set<S: AsRef<str>>(&self, names: &[S]) -> Result<FunctionSet, RegistryError> {
        let mut functions = Vec::with_capacity(names.len());
        for name in names {
            let name = name.as_ref();
            if functions
                .iter()
                .any(|f: &RegisteredFunction| f.schema.name == name)
            {
                continue;
            }
            let registered = self
                .get(name)
                .ok_or_else(|| RegistryError::UnknownFunction {
                    name: name.to_owned(),
                    available: self.names().map(str::to_owned).collect(),
                })?;
            functions.push(registered.clone());
        }
        let schemas = shared_schemas(functions.iter().map(|f| &f.schema));
        let functions = functions.into_iter().map(|f| f.function).collect();
        Ok(FunctionSet { functions, schemas })
    }
}

/// The schemas as one shared list: agents offered the same functions (the common case: every
/// agent with the defaults) share one copy instead of a deep copy each, which is most of an
/// idle agent's memory otherwise. Lists no agent holds any more are dropped.
fn shared_schemas<'a>(schemas: impl Iterator<Item = &'a ToolSchema>) -> Arc<[ToolSchema]> {
    static SHARED: std::sync::Mutex<Vec<std::sync::Weak<[ToolSchema]>>> =
        std::sync::Mutex::new(Vec::new());
    let wanted: Vec<&ToolSchema> = schemas.collect();
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    shared.retain(|weak| weak.strong_count() > 0);
    let found = shared
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .find(|list| list.len() == wanted.len() && list.iter().zip(&wanted).all(|(a, b)| a == *b));
    if let Some(list) = found {
        return list;
    }
    let list: Arc<[ToolSchema]> = wanted.into_iter().cloned().collect();
    shared.push(Arc::downgrade(&list));
    list
}

/// `schema` without its `request_heartbeat` parameter.
fn without_heartbeat(schema: &ToolSchema) -> ToolSchema {
    let mut schema = schema.clone();
    if let Some(parameters) = schema.parameters.as_object_mut() {
        if let Some(properties) = parameters
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        {
            properties.remove(HEARTBEAT);
        }
        if let Some(required) = parameters
            .get_mut("required")
            .and_then(serde_json::Value::as_array_mut)
        {
            required.retain(|name| name != HEARTBEAT);
        }
    }
    schema
}

/// The name of the heartbeat parameter.
pub(crate) const HEARTBEAT: &str = "request_heartbeat";

/// The ordered set of functions one agent may call.
#[derive(Clone, Debug)]
pub struct FunctionSet {
    /// The functions, in the order of `schemas`.
    functions: Vec<Arc<dyn Function>>,
    schemas: Arc<[ToolSchema]>,
}

impl FunctionSet {
    /// The function called `name`, if the agent has it.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Function>> {
        self.schemas
            .iter()
            .position(|s| s.name == name)
            .map(|i| &self.functions[i])
    }

    /// The schemas sent to the LLM, in order.
    pub fn schemas(&self) -> &Arc<[ToolSchema]> {
        &self.schemas
    }

    /// The schema of the function called `name`, if the agent has it.
    pub fn schema(&self, name: &str) -> Option<&ToolSchema> {
        self.schemas.iter().find(|s| s.name == name)
    }

    /// The schemas as the [`LoopStyle::UntilReply`](crate::config::LoopStyle::UntilReply) loop
    /// offers them: without the `request_heartbeat` parameter (shared between agents like
    /// [`FunctionSet::schemas`]).
    pub fn schemas_without_heartbeat(&self) -> Arc<[ToolSchema]> {
        let stripped: Vec<ToolSchema> = self.schemas.iter().map(without_heartbeat).collect();
        shared_schemas(stripped.iter())
    }

    /// The function names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.schemas.iter().map(|s| s.name.as_str())
    }

    /// How many functions there are.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use serde_json::json;

    use super::*;
    use crate::function::{FunctionContext, FunctionReturn};

    #[derive(Debug)]
    struct Dynamic(&'static str, serde_json::Value);

    #[async_trait]
    impl Function for Dynamic {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "a runtime function"
        }
        fn parameters(&self) -> serde_json::Value {
            self.1.clone()
        }
        async fn call(
            &self,
            _ctx: &mut FunctionContext<'_>,
            _arguments: serde_json::Value,
        ) -> FunctionReturn {
            FunctionReturn::ok("dynamic", false)
        }
    }

    #[test]
    fn builtins_are_linked() {
        let registry = FunctionRegistry::linked().unwrap();
        for name in crate::builtin::DEFAULT_FUNCTIONS {
            assert!(registry.get(name).is_some(), "{name} missing");
        }
    }

    #[test]
    fn duplicates_and_bad_names_are_rejected() {
        let mut registry = FunctionRegistry::linked().unwrap();
        let err = registry
            .register(Dynamic("send_message", json!({"type": "object"})))
            .unwrap_err();
        assert!(
            matches!(err, RegistryError::DuplicateName { ref second, .. } if second == "runtime"),
            "{err}"
        );
        assert!(err.to_string().contains("memgpt_core::builtin"));
        assert!(matches!(
            registry.register(Dynamic("has space", json!({"type": "object"}))),
            Err(RegistryError::InvalidName(_))
        ));
        assert!(matches!(
            registry.register(Dynamic("x", json!({"type": "string"}))),
            Err(RegistryError::InvalidSchema { .. })
        ));
        registry
            .register(Dynamic("lookup", json!({"type": "object"})))
            .unwrap();
        assert!(registry.get("lookup").is_some());
        assert!(
            FunctionRegistry::linked().unwrap().get("lookup").is_none(),
            "registering does not touch the linked set"
        );
    }

    #[test]
    fn function_sets_keep_order_and_reject_unknown_names() {
        let registry = FunctionRegistry::linked().unwrap();
        let set = registry
            .function_set(&["send_message", "core_memory_append", "send_message"])
            .unwrap();
        assert_eq!(
            set.names().collect::<Vec<_>>(),
            ["send_message", "core_memory_append"]
        );
        let err = registry.function_set(&["send_mesage"]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("no function named `send_mesage` is registered")
        );
    }
}
