//! [`Llm`]: the chat model a command talks to, the embedder that goes with it, and which API
//! it speaks.

use std::sync::Arc;

use memgpt::embed::Embedder;
use memgpt::llm::LlmProvider;

/// The chat model (and the embedder that goes with it).
pub struct Llm {
    pub provider: Arc<dyn LlmProvider>,
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Which API the provider speaks: decides whether an agent's own model can be sent to it.
    pub kind: ProviderKind,
    /// For the banner and `/model`: where the model runs (`at http://...`), or the whole
    /// description of the local model.
    pub description: String,
}

/// The API an [`Llm`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// An OpenAI-compatible endpoint.
    OpenAi,
    /// Anthropic's Messages API.
    #[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
    Anthropic,
    /// The local model (it runs one model whatever is asked).
    Local,
}

impl ProviderKind {
    /// Whether a model named `model` can be asked of this provider: a model name of another
    /// vendor's family (`claude-...` of an OpenAI endpoint, `gpt-...` of Anthropic) cannot.
    pub fn serves(self, model: &str) -> bool {
        let model = model.to_ascii_lowercase();
        let openai = ["gpt-", "o1", "o3", "o4", "chatgpt"]
            .iter()
            .any(|p| model.starts_with(p));
        match self {
            ProviderKind::OpenAi => !model.starts_with("claude"),
            ProviderKind::Anthropic => !openai,
            ProviderKind::Local => false,
        }
    }
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

impl Llm {
    /// What is sent to, as one line: `model gpt-4o-mini at http://...` for `model` (empty: the
    /// provider's own), or the local model's description.
    pub fn describe(&self, model: &str) -> String {
        if self.kind == ProviderKind::Local {
            return self.description.clone();
        }
        let model = if model.is_empty() {
            self.provider.model()
        } else {
            model
        };
        format!("model {model} {}", self.description)
    }
}
