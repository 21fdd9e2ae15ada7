//! The embedding space a store holds, and the checks every store runs against it.

use serde::{Deserialize, Serialize};

use super::error::StoreError;
use crate::embed::Embedding;

/// The embedding model and dimension a store holds vectors of.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EmbeddingSpace {
    /// The model id.
    pub model: String,
    /// The vectors' dimension.
    pub dimension: usize,
}

impl EmbeddingSpace {
    /// The space of `embedding`.
    pub fn of(embedding: &Embedding) -> Self {
        Self {
            model: embedding.model.clone(),
            dimension: embedding.dimension(),
        }
    }

    /// Fails with [`StoreError::EmbeddingMismatch`] unless `embedding` is of this space.
    pub fn check(&self, embedding: &Embedding) -> Result<(), StoreError> {
        self.check_model(&embedding.model, embedding.dimension())
    }

    /// Fails with [`StoreError::EmbeddingMismatch`] unless `model` and `dimension` are this
    /// space's.
    pub fn check_model(&self, model: &str, dimension: usize) -> Result<(), StoreError> {
        if model != self.model || dimension != self.dimension {
            return Err(StoreError::EmbeddingMismatch {
                expected_model: self.model.clone(),
                expected_dimension: self.dimension,
                found_model: model.to_owned(),
                found_dimension: dimension,
            });
        }
        Ok(())
    }

    /// The space a store holds after writing `embeddings`, checked the same way by every store:
    /// `stored` when the store already has one (every embedding must be of it), otherwise the
    /// first embedding's (the rest must match it). `None` when there is neither. Fails with
    /// [`StoreError::EmbeddingMismatch`] at the first embedding of another space.
    ///
    /// ```
    /// use memgpt_core::embed::Embedding;
    /// use memgpt_core::store::EmbeddingSpace;
    ///
    /// let e = |model: &str, d: usize| Embedding { model: model.into(), vector: vec![0.5; d] };
    /// let (a, b) = (e("mini", 4), e("mini", 4));
    /// let space = EmbeddingSpace::settle(None, [&a, &b]).unwrap().unwrap();
    /// assert_eq!(space, EmbeddingSpace { model: "mini".into(), dimension: 4 });
    /// assert!(EmbeddingSpace::settle(Some(space), [&e("other", 4)]).is_err());
    /// assert_eq!(EmbeddingSpace::settle(None, []).unwrap(), None);
    /// ```
    pub fn settle<'a>(
        stored: Option<EmbeddingSpace>,
        embeddings: impl IntoIterator<Item = &'a Embedding>,
    ) -> Result<Option<EmbeddingSpace>, StoreError> {
        let mut space = stored;
        for embedding in embeddings {
            match &space {
                Some(space) => space.check(embedding)?,
                None => space = Some(Self::of(embedding)),
            }
        }
        Ok(space)
    }
}
