//! The effective configuration: defaults, then `memgpt.toml`, then environment variables, then
//! command-line flags, each later source overriding the earlier ones.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// One setting: its key in `memgpt.toml`, the environment variables that set it (first wins),
/// whether it is a secret, and what it means.
pub struct Key {
    pub name: &'static str,
    pub env: &'static [&'static str],
    pub secret: bool,
    pub help: &'static str,
}

/// Every setting there is, in the order `memgpt config` prints them.
pub const KEYS: &[Key] = &[
    Key {
        name: "data_dir",
        env: &["MEMGPT_DATA_DIR"],
        secret: false,
        help: "where agents live (SQLite + tantivy + usearch)",
    },
    Key {
        name: "store",
        env: &["MEMGPT_STORE"],
        secret: false,
        help: "a store URL instead of the data directory (sqlite://DIR, postgres://..., memory://)",
    },
    Key {
        name: "provider",
        env: &["MEMGPT_PROVIDER"],
        secret: false,
        help: "auto | openai | anthropic | local",
    },
    Key {
        name: "base_url",
        env: &["MEMGPT_BASE_URL", "OPENAI_BASE_URL"],
        secret: false,
        help: "an OpenAI-compatible endpoint",
    },
    Key {
        name: "model",
        env: &["MEMGPT_MODEL", "OPENAI_MODEL"],
        secret: false,
        help: "the chat model",
    },
    Key {
        name: "api_key",
        env: &["MEMGPT_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"],
        secret: true,
        help: "the endpoint's key",
    },
    Key {
        name: "context_window",
        env: &["MEMGPT_CONTEXT_WINDOW"],
        secret: false,
        help: "tokens (known models are looked up; others 8192)",
    },
    Key {
        name: "tool_calling",
        env: &["MEMGPT_TOOL_CALLING"],
        secret: false,
        help: "native | json_schema | guided_json | grammar | text",
    },
    Key {
        name: "policy",
        env: &["MEMGPT_POLICY"],
        secret: false,
        help: "the page-replacement policy of new agents",
    },
    Key {
        name: "loop_style",
        env: &["MEMGPT_LOOP_STYLE"],
        secret: false,
        help: "heartbeat | until_reply: how steps of new agents go on after a function call",
    },
    Key {
        name: "embedder",
        env: &["MEMGPT_EMBEDDER"],
        secret: false,
        help: "auto | none | local | all-minilm-l6-v2 | all-mpnet-base-v2 | openai:MODEL",
    },
    Key {
        name: "otlp_endpoint",
        env: &["MEMGPT_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"],
        secret: false,
        help: "export traces over OTLP/HTTP to this collector, e.g. http://localhost:4318 (feature otel)",
    },
];

/// Where a value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(&'static str),
    Flag,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Env(name) => write!(f, "${name}"),
            Source::Flag => f.write_str("flag"),
        }
    }
}

/// The merged settings.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    values: BTreeMap<&'static str, (String, Source)>,
    /// `--yes`: download missing local models without asking.
    pub assume_yes: bool,
    /// `[mcp_servers.NAME]` tables of `memgpt.toml`, in the file's order.
    pub mcp_servers: Vec<McpServerEntry>,
}

/// One `[mcp_servers.NAME]` table: an MCP server whose tools the agents get.
///
/// ```toml
/// [mcp_servers.files]                 # a child process speaking over stdio
/// command = "npx"
/// args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]
/// env = { LOG_LEVEL = "warn" }
///
/// [mcp_servers.search]                # a server speaking streamable HTTP
/// url = "http://127.0.0.1:8000/mcp"
/// bearer_token = "..."
/// timeout_secs = 30
/// agents = ["sam"]                    # only these agents (default: every agent)
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct McpServerEntry {
    /// The server's name (the prefix of its tools' function names).
    pub name: String,
    /// `name`, `transport` (`stdio` or `http`) and the rest, in memgpt-mcp's
    /// `McpServerConfig` JSON form.
    pub config: serde_json::Value,
    /// The agents it is attached to; empty: every agent.
    pub agents: Vec<String>,
}

impl McpServerEntry {
    /// How it is reached: `("stdio", command)` or `("http", url)`.
    pub fn endpoint(&self) -> (&'static str, &str) {
        let text = |key| self.config.get(key).and_then(serde_json::Value::as_str);
        match (text("command"), text("url")) {
            (Some(command), _) => ("stdio", command),
            (None, url) => ("http", url.unwrap_or_default()),
        }
    }

    /// Whether the agent `name` gets this server's tools.
    pub fn serves(&self, agent: &str) -> bool {
        self.agents.is_empty() || self.agents.iter().any(|a| a == agent)
    }

    /// Reads one `[mcp_servers.NAME]` table.
    fn from_toml(name: &str, value: toml::Value, path: &Path) -> Result<Self> {
        const KEYS: [&str; 7] = [
            "command",
            "args",
            "env",
            "url",
            "bearer_token",
            "timeout_secs",
            "agents",
        ];
        let where_ = format!("{}: [mcp_servers.{name}]", path.display());
        let toml::Value::Table(table) = value else {
            bail!("{where_} must be a table (command = ... or url = ...)");
        };
        if let Some(unknown) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
            bail!(
                "{where_}: unknown key `{unknown}` (known: {})",
                KEYS.join(", ")
            );
        }
        let mut config: serde_json::Map<String, serde_json::Value> = serde_json::to_value(&table)
            .with_context(|| format!("{where_}: not representable as JSON"))?
            .as_object()
            .cloned()
            .unwrap_or_default();
        let agents = match config.remove("agents") {
            None => Vec::new(),
            Some(value) => serde_json::from_value(value)
                .with_context(|| format!("{where_}: `agents` must be a list of agent names"))?,
        };
        let transport = match (config.contains_key("command"), config.contains_key("url")) {
            (true, false) => "stdio",
            (false, true) => "http",
            (true, true) => {
                bail!("{where_}: give either `command` (stdio) or `url` (HTTP), not both")
            }
            (false, false) => {
                bail!("{where_}: needs `command` (a stdio server) or `url` (streamable HTTP)")
            }
        };
        config.insert("name".into(), name.into());
        config.insert("transport".into(), transport.into());
        Ok(Self {
            name: name.to_owned(),
            config: serde_json::Value::Object(config),
            agents,
        })
    }
}

impl Settings {
    /// Defaults, then the file (`explicit`, else `./memgpt.toml` if present), then `env`, then
    /// `flags` (setting name to value).
    pub fn load(
        explicit: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
        flags: &[(&'static str, Option<String>)],
    ) -> Result<Self> {
        let mut settings = Settings::default();
        settings.set("data_dir", "./memgpt-data".into(), Source::Default);
        settings.set("provider", "auto".into(), Source::Default);
        settings.set("embedder", "auto".into(), Source::Default);

        let file = match explicit {
            Some(path) => Some(path.to_owned()),
            None => env("MEMGPT_CONFIG")
                .map(PathBuf::from)
                .or_else(|| Some(PathBuf::from("memgpt.toml")).filter(|p| p.exists())),
        };
        if let Some(path) = file {
            settings.merge_file(&path)?;
        }
        for key in KEYS {
            if let Some((var, value)) = key
                .env
                .iter()
                .find_map(|var| env(var).filter(|v| !v.trim().is_empty()).map(|v| (*var, v)))
            {
                settings.set(key.name, value, Source::Env(var));
            }
        }
        // The older variable of the chat example.
        if settings.source("embedder") == Some(&Source::Default)
            && let Some(model) = env("MEMGPT_EMBEDDING_MODEL").filter(|m| !m.trim().is_empty())
        {
            settings.set(
                "embedder",
                format!("openai:{model}"),
                Source::Env("MEMGPT_EMBEDDING_MODEL"),
            );
        }
        for (name, value) in flags {
            if let Some(value) = value {
                settings.set(name, value.clone(), Source::Flag);
            }
        }
        Ok(settings)
    }

    fn merge_file(&mut self, path: &Path) -> Result<()> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the configuration file {}", path.display()))?;
        let table: toml::Table = text
            .parse()
            .with_context(|| format!("{} is not valid TOML", path.display()))?;
        for (name, value) in table {
            if name == "mcp_servers" {
                let toml::Value::Table(servers) = value else {
                    bail!(
                        "{}: `mcp_servers` must be tables, [mcp_servers.NAME]",
                        path.display()
                    );
                };
                for (server, value) in servers {
                    let entry = McpServerEntry::from_toml(&server, value, path)?;
                    self.mcp_servers.retain(|e| e.name != entry.name);
                    self.mcp_servers.push(entry);
                }
                continue;
            }
            let Some(key) = KEYS.iter().find(|k| k.name == name) else {
                bail!(
                    "{}: unknown setting `{name}` (known: {}, and [mcp_servers.NAME] tables)",
                    path.display(),
                    KEYS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
                );
            };
            let value = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => bail!(
                    "{}: `{name}` must be a string or a number, not {}",
                    path.display(),
                    other.type_str()
                ),
            };
            self.set(key.name, value, Source::File(path.to_owned()));
        }
        Ok(())
    }

    fn set(&mut self, name: &'static str, value: String, source: Source) {
        self.values.insert(name, (value, source));
    }

    /// A setting's value, if it has one.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|(v, _)| v.as_str())
    }

    /// Where a setting's value came from.
    pub fn source(&self, name: &str) -> Option<&Source> {
        self.values.get(name).map(|(_, s)| s)
    }

    /// A setting that must be a number, or an error naming it and where it was set.
    pub fn number(&self, name: &str) -> Result<Option<usize>> {
        let Some((value, source)) = self.values.get(name) else {
            return Ok(None);
        };
        value.trim().parse().map(Some).map_err(|_| {
            anyhow::anyhow!(
                "setting `{name}` (from {source}) must be a whole number, got `{value}`"
            )
        })
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        PathBuf::from(self.get("data_dir").unwrap_or("./memgpt-data"))
    }

    /// The store URL: `store`, else the data directory with every embedded index.
    pub fn store_url(&self) -> String {
        match self.get("store") {
            Some(url) => url.to_owned(),
            None => format!("sqlite://{}", self.data_dir().display()),
        }
    }

    /// The lookup the providers' `from_lookup` constructors read (their variable names).
    pub fn provider_lookup(&self) -> impl Fn(&str) -> Option<String> + '_ {
        move |var| {
            let name = match var {
                "MEMGPT_BASE_URL" | "OPENAI_BASE_URL" | "ANTHROPIC_BASE_URL" => "base_url",
                "MEMGPT_API_KEY" | "OPENAI_API_KEY" | "ANTHROPIC_API_KEY" => "api_key",
                "MEMGPT_MODEL" | "OPENAI_MODEL" => "model",
                "MEMGPT_CONTEXT_WINDOW" => "context_window",
                "MEMGPT_TOOL_CALLING" => "tool_calling",
                _ => return None,
            };
            self.get(name).map(str::to_owned)
        }
    }

    /// Every setting, its value (secrets masked) and its source.
    #[cfg(test)]
    pub fn render(&self) -> String {
        self.render_with(&[])
    }

    /// `memgpt config`: every setting, its value (secrets masked) and its source; the settings
    /// in `resolved` show what they resolve to instead of their value (`embedder = auto` as
    /// `all-minilm-l6-v2 (local, auto)`).
    pub fn render_with(&self, resolved: &[(&str, String)]) -> String {
        let mut out = String::new();
        for key in KEYS {
            let shown = resolved
                .iter()
                .find(|(name, _)| *name == key.name)
                .map(|(_, value)| value);
            let (value, source) = match self.values.get(key.name) {
                Some((_, source)) if shown.is_some() => {
                    (shown.cloned().unwrap_or_default(), source.to_string())
                }
                Some((value, source)) if key.secret => (mask(value), source.to_string()),
                Some((value, source)) if key.name == "store" => {
                    (without_password(value), source.to_string())
                }
                Some((value, source)) => (value.clone(), source.to_string()),
                None if key.name == "store" => (self.store_url(), "from data_dir".to_owned()),
                None => ("(unset)".to_owned(), String::new()),
            };
            let source = if source.is_empty() {
                String::new()
            } else {
                format!("  [{source}]")
            };
            out.push_str(&format!(
                "{:<15} = {value}{source}\n{:<15}   # {}\n",
                key.name, "", key.help
            ));
        }
        for server in &self.mcp_servers {
            let how = match server.endpoint() {
                ("stdio", command) => format!("stdio `{command}`"),
                (_, url) => format!("streamable HTTP {url}"),
            };
            let agents = if server.agents.is_empty() {
                "every agent".to_owned()
            } else {
                server.agents.join(", ")
            };
            out.push_str(&format!(
                "mcp_servers.{} = {how}  # tools for {agents}\n",
                server.name
            ));
        }
        out
    }
}

/// `url` with its password (if any) hidden, for logs and `memgpt config`.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    match authority.rsplit_once('@') {
        Some((userinfo, _)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{}", &rest[userinfo.len() + 1..])
        }
        _ => url.to_owned(),
    }
}

/// `sk-abcdef123456` as `sk-a…3456`; short secrets entirely.
fn mask(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() <= 12 {
        return "*".repeat(chars.len().max(3));
    }
    let head: String = chars[..4].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_stay_out_of_the_banner_and_the_config() {
        assert_eq!(
            without_password("postgres://memgpt:secret@db:5432/x?schema=s"),
            "postgres://memgpt:***@db:5432/x?schema=s"
        );
        assert_eq!(without_password("postgres://db/x"), "postgres://db/x");
        assert_eq!(without_password("sqlite://./data"), "sqlite://./data");
        let settings = Settings::load(
            None,
            env(&[("MEMGPT_STORE", "postgres://u:hunter2@db/x")]),
            &[],
        )
        .unwrap();
        let shown = settings.render();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("postgres://u:***@db/x"), "{shown}");
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memgpt.toml");
        std::fs::write(
            &file,
            "model = \"from-file\"\npolicy = \"lru\"\ncontext_window = 4096\n",
        )
        .unwrap();
        let s = Settings::load(
            Some(&file),
            env(&[("MEMGPT_MODEL", "from-env"), ("MEMGPT_POLICY", "attention")]),
            &[("model", Some("from-flag".into())), ("store", None)],
        )
        .unwrap();
        assert_eq!(s.get("model"), Some("from-flag"));
        assert_eq!(s.get("policy"), Some("attention"));
        assert_eq!(s.source("policy"), Some(&Source::Env("MEMGPT_POLICY")));
        assert_eq!(s.number("context_window").unwrap(), Some(4096));
        assert_eq!(s.source("context_window"), Some(&Source::File(file)));
        assert_eq!(s.get("provider"), Some("auto"));
        assert_eq!(s.store_url(), "sqlite://./memgpt-data");
    }

    #[test]
    fn secrets_are_masked_and_bad_values_name_the_setting() {
        let s = Settings::load(
            None,
            env(&[
                ("OPENAI_API_KEY", "sk-abcdefghijklmnop1234"),
                ("MEMGPT_CONTEXT_WINDOW", "lots"),
            ]),
            &[],
        )
        .unwrap();
        let shown = s.render();
        assert!(shown.contains("sk-a…1234"), "{shown}");
        assert!(!shown.contains("abcdefghijklmnop"), "{shown}");
        let err = s.number("context_window").unwrap_err().to_string();
        assert!(
            err.contains("context_window") && err.contains("$MEMGPT_CONTEXT_WINDOW"),
            "{err}"
        );
    }

    #[test]
    fn unknown_file_settings_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memgpt.toml");
        std::fs::write(&file, "modle = \"x\"\n").unwrap();
        let err = Settings::load(Some(&file), |_| None, &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown setting `modle`"), "{err}");
    }
}
