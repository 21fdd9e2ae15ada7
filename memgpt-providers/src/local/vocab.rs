//! The model's tokenizer, read from the GGUF file itself: a byte-level BPE (GPT-2 style, as
//! SmolLM2, Llama 3 and most current small models use), the bytes each token stands for (to
//! stream text and to check tokens against a grammar), and which tokens end a turn.

use candle_core::quantized::gguf_file::{Content, Value};

use super::model::whole;
use tokenizers::models::bpe::{BPE, Vocab as BpeVocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, PreTokenizerWrapper, Tokenizer};

/// GGUF token types (llama.cpp's `llama_token_type`).
const TOKEN_TYPE_CONTROL: u32 = 3;
const TOKEN_TYPE_USER_DEFINED: u32 = 4;

/// Text ends of a turn, recognised by name when the file does not list them as EOS.
const END_OF_TURN: &[&str] = &["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>"];

/// Token ids, and each token's byte range in the text they came from.
pub(crate) type Encoded = (Vec<u32>, Vec<(usize, usize)>);

/// The tokenizer and what each token means.
pub(crate) struct Vocab {
    tokenizer: Tokenizer,
    /// The bytes of each token's text (empty for control tokens).
    bytes: Vec<Vec<u8>>,
    /// Control tokens (`<|im_start|>`...): never text, never allowed under a grammar.
    control: Vec<bool>,
    /// Tokens that end generation.
    end_of_generation: Vec<u32>,
}

fn metadata<'a>(content: &'a Content, key: &str) -> Result<&'a Value, String> {
    content
        .metadata
        .get(key)
        .ok_or_else(|| format!("the GGUF file has no `{key}`"))
}

fn strings(value: &Value, key: &str) -> Result<Vec<String>, String> {
    let items = value
        .to_vec()
        .map_err(|_| format!("`{key}` is not a list"))?;
    items
        .iter()
        .map(|v| {
            v.to_string()
                .cloned()
                .map_err(|_| format!("`{key}` holds a non-string"))
        })
        .collect()
}

/// GPT-2's reversible map from bytes to printable characters, inverted: the byte each
/// character of a byte-level token stands for.
fn byte_of_char() -> std::collections::HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut map = std::collections::HashMap::with_capacity(256);
    let mut next = 0u32;
    for b in 0..=255u8 {
        let c = if printable(b) {
            char::from(b)
        } else {
            next += 1;
            char::from_u32(255 + next).unwrap_or(char::REPLACEMENT_CHARACTER)
        };
        map.insert(c, b);
    }
    map
}

impl Vocab {
    /// Reads the tokenizer stored in `content` (`tokenizer.ggml.*`).
    pub(crate) fn from_gguf(content: &Content) -> Result<Self, String> {
        let kind = metadata(content, "tokenizer.ggml.model")?
            .to_string()
            .map_err(|e| e.to_string())?;
        if kind != "gpt2" {
            return Err(format!(
                "the model's tokenizer is `{kind}`; the local engine reads byte-level BPE \
                 (`gpt2`) tokenizers, as SmolLM2 and Llama 3 models have"
            ));
        }
        let tokens = strings(
            metadata(content, "tokenizer.ggml.tokens")?,
            "tokenizer.ggml.tokens",
        )?;
        let merges = strings(
            metadata(content, "tokenizer.ggml.merges")?,
            "tokenizer.ggml.merges",
        )?
        .into_iter()
        .filter_map(|m| m.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())))
        .collect::<Vec<_>>();
        let types: Vec<u32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(value) => value
                .to_vec()
                .map_err(|e| e.to_string())?
                .iter()
                .map(|v| whole(v).unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        let control: Vec<bool> = (0..tokens.len())
            .map(|i| {
                matches!(
                    types.get(i),
                    Some(&TOKEN_TYPE_CONTROL | &TOKEN_TYPE_USER_DEFINED)
                )
            })
            .collect();

        let vocab: BpeVocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| format!("the GGUF tokenizer: {e}"))?;
        let mut tokenizer = Tokenizer::new(bpe);
        // Digits one by one (SmolLM2, StarCoder), then GPT-2's byte-level split without a
        // space added in front (a space would change the first word after `<|im_start|>`).
        let pre = content
            .metadata
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.to_string().ok().cloned())
            .unwrap_or_default();
        let byte_level = ByteLevel::new(false, true, true);
        let pre_tokenizer: PreTokenizerWrapper = if matches!(pre.as_str(), "smollm" | "starcoder") {
            Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
        } else {
            byte_level.into()
        };
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
        let specials: Vec<AddedToken> = tokens
            .iter()
            .zip(&control)
            .filter(|(_, c)| **c)
            .map(|(t, _)| AddedToken::from(t.clone(), true))
            .collect();
        tokenizer
            .add_special_tokens(specials)
            .map_err(|e| format!("the GGUF tokenizer's control tokens: {e}"))?;

        let table = byte_of_char();
        let bytes = tokens
            .iter()
            .zip(&control)
            .map(|(t, c)| {
                if *c {
                    Vec::new()
                } else {
                    t.chars()
                        .flat_map(|ch| match table.get(&ch) {
                            Some(b) => vec![*b],
                            None => ch.to_string().into_bytes(),
                        })
                        .collect()
                }
            })
            .collect();

        let mut end_of_generation: Vec<u32> = content
            .metadata
            .get("tokenizer.ggml.eos_token_id")
            .and_then(whole)
            .into_iter()
            .collect();
        for name in END_OF_TURN {
            if let Some(i) = tokens.iter().position(|t| t == name) {
                end_of_generation.push(i as u32);
            }
        }
        end_of_generation.sort_unstable();
        end_of_generation.dedup();
        if end_of_generation.is_empty() {
            return Err("the model names no end-of-generation token".into());
        }
        Ok(Self {
            tokenizer,
            bytes,
            control,
            end_of_generation,
        })
    }

    /// Tokens of `text`, control tokens written as text (`<|im_start|>`) included.
    #[cfg(test)]
    pub(crate) fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.encode_with_offsets(text).map(|(ids, _)| ids)
    }

    /// Tokens of `text` as [`Vocab::encode`] makes them, with each token's byte range in
    /// `text`.
    pub(crate) fn encode_with_offsets(&self, text: &str) -> Result<Encoded, String> {
        self.tokenizer
            .encode(text, false)
            .map(|e| (e.get_ids().to_vec(), e.get_offsets().to_vec()))
            .map_err(|e| format!("tokenizing the prompt: {e}"))
    }

    /// The bytes token `id` stands for (empty for control tokens).
    pub(crate) fn bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// Whether `id` is a control token.
    pub(crate) fn is_control(&self, id: u32) -> bool {
        self.control.get(id as usize).copied().unwrap_or(true)
    }

    /// Whether `id` ends generation.
    pub(crate) fn ends_generation(&self, id: u32) -> bool {
        self.end_of_generation.contains(&id)
    }

    /// Whether the vocabulary has `text` as one control token (`<|im_start|>`).
    pub(crate) fn has_control(&self, text: &str) -> bool {
        self.tokenizer
            .token_to_id(text)
            .is_some_and(|id| self.is_control(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smollm2() -> Content {
        let path = super::super::test_model();
        let mut file = std::fs::File::open(&path).expect("the model file");
        Content::read(&mut file).expect("a GGUF file")
    }

    #[test]
    #[ignore = "needs SmolLM2: set MEMGPT_TEST_MODELS to the model cache .ci/models.sh fills, and run with --ignored (.ci/run does)"]
    fn the_gguf_tokenizer_round_trips_and_keeps_turn_markers_whole() {
        let content = smollm2();
        let vocab = Vocab::from_gguf(&content).unwrap();
        let text = "<|im_start|>system\nYou are Sam. Born 1990, café 😢 {\"a\": [1, 2]}<|im_end|>\n\
                    <|im_start|>assistant\n";
        let ids = vocab.encode(text).unwrap();
        let start = ids[0];
        assert!(vocab.is_control(start) && vocab.bytes(start).is_empty());
        // No space is invented after a control token (`system`, not ` system`).
        assert_eq!(vocab.bytes(ids[1]), b"system");
        // The text comes back byte for byte, control tokens aside.
        let back: Vec<u8> = ids
            .iter()
            .flat_map(|&id| vocab.bytes(id).to_vec())
            .collect();
        let plain = text.replace("<|im_start|>", "").replace("<|im_end|>", "");
        assert_eq!(String::from_utf8(back).unwrap(), plain);
        // Digits one by one, as SmolLM2 was trained.
        let digits = vocab.encode("1990").unwrap();
        assert_eq!(digits.len(), 4);
        let end = ids[ids
            .iter()
            .position(|&id| id != start && vocab.is_control(id))
            .unwrap()];
        assert!(vocab.ends_generation(end), "<|im_end|> ends a reply");
        assert!(!vocab.ends_generation(start));

        // Offsets are byte ranges of the text, in order: a token's own bytes where it holds
        // whole characters (a character split over tokens, like the emoji, gives each piece
        // the whole character's range).
        let (same, offsets) = vocab.encode_with_offsets(text).unwrap();
        assert_eq!(same, ids);
        for (&id, &(from, to)) in ids.iter().zip(&offsets) {
            let bytes = vocab.bytes(id);
            if !vocab.is_control(id) && std::str::from_utf8(bytes).is_ok() {
                assert_eq!(text.as_bytes()[from..to], *bytes, "token {id}");
            }
            assert!(from <= to && to <= text.len());
        }
        assert!(offsets.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}
