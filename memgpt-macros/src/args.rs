//! The attribute's own arguments: `#[memgpt_fn]`, `#[memgpt_fn(terminal)]`,
//! `#[memgpt_fn(name = "x", terminal)]`.

use syn::parse::{Parse, ParseStream};
use syn::{Ident, LitStr, Token};

#[derive(Default)]
pub(crate) struct FnArgs {
    pub(crate) name: Option<LitStr>,
    pub(crate) terminal: Option<Ident>,
}

impl Parse for FnArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = FnArgs::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            match key.to_string().as_str() {
                "name" => {
                    if args.name.is_some() {
                        return Err(syn::Error::new(key.span(), "duplicate `name` argument"));
                    }
                    input.parse::<Token![=]>()?;
                    args.name = Some(input.parse()?);
                }
                "terminal" => {
                    if args.terminal.is_some() {
                        return Err(syn::Error::new(key.span(), "duplicate `terminal` argument"));
                    }
                    args.terminal = Some(key);
                }
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown #[memgpt_fn] argument `{other}`; expected `name = \"...\"` or `terminal`"
                        ),
                    ));
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(args)
    }
}
