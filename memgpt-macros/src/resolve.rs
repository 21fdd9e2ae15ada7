//! The one place that decides which crate generated code names.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::{Span, TokenStream};
use quote::quote;

/// The path of the runtime crate: `::memgpt` when the user depends on the facade, else
/// `::memgpt_core` (renamed dependencies are followed).
pub(crate) fn runtime_crate() -> syn::Result<TokenStream> {
    for (package, default) in [("memgpt", "memgpt"), ("memgpt-core", "memgpt_core")] {
        match crate_name(package) {
            Ok(FoundCrate::Itself) => {
                let ident = syn::Ident::new(default, Span::call_site());
                return Ok(quote!(::#ident));
            }
            Ok(FoundCrate::Name(name)) => {
                let ident = syn::Ident::new(&name, Span::call_site());
                return Ok(quote!(::#ident));
            }
            Err(_) => continue,
        }
    }
    Err(syn::Error::new(
        Span::call_site(),
        "#[memgpt_fn] needs the `memgpt` crate (or `memgpt-core`) as a dependency of this crate",
    ))
}
