//! Reads and checks the annotated function's signature: which parameter is the context, what
//! the others are called, what they document.

use quote::quote;
use syn::{Attribute, Expr, ExprLit, FnArg, Lit, Meta, Pat, Type};

/// How the function takes its context.
pub(crate) enum ContextParam {
    None,
    Shared,
    Exclusive,
}

/// One LLM-facing parameter.
pub(crate) struct Param {
    pub(crate) ident: syn::Ident,
    pub(crate) ty: Type,
    pub(crate) docs: Vec<String>,
    /// `#[serde]` / `#[schemars]` attributes moved onto the arguments struct's field.
    pub(crate) forwarded: Vec<Attribute>,
}

pub(crate) struct Signature {
    pub(crate) context: ContextParam,
    pub(crate) params: Vec<Param>,
}

/// Checks the signature and strips the helper attributes (docs, serde, schemars) off the
/// parameters, which Rust does not accept there.
///
/// Errors use `Error::new_spanned`, which underlines the whole offending construct (`&str`,
/// `<T>`, `&self`); `Spanned::span` would only mark its first token on stable Rust.
pub(crate) fn analyse(item: &mut syn::ItemFn) -> syn::Result<Signature> {
    let sig = &mut item.sig;
    if sig.asyncness.is_none() {
        let fn_token = &sig.fn_token;
        let ident = &sig.ident;
        return Err(syn::Error::new_spanned(
            quote!(#fn_token #ident),
            "#[memgpt_fn] requires an `async fn` (functions may await storage and network calls)",
        ));
    }
    let generic_error = |tokens: &dyn quote::ToTokens| {
        Err(syn::Error::new_spanned(
            tokens,
            "#[memgpt_fn] functions cannot be generic: the LLM needs one concrete schema",
        ))
    };
    if !sig.generics.params.is_empty() {
        // `Generics` prints its parameters only; a lone `where` clause is reported below.
        return generic_error(&sig.generics);
    }
    if let Some(where_clause) = &sig.generics.where_clause {
        return generic_error(where_clause);
    }
    if let Some(variadic) = &sig.variadic {
        return Err(syn::Error::new_spanned(
            variadic,
            "#[memgpt_fn] functions cannot be variadic",
        ));
    }

    let mut context = ContextParam::None;
    let mut params = Vec::new();
    for (index, input) in sig.inputs.iter_mut().enumerate() {
        let typed = match input {
            FnArg::Receiver(receiver) => {
                return Err(syn::Error::new_spanned(
                    receiver,
                    "#[memgpt_fn] must be a free function, not a method: the registry calls it without a receiver",
                ));
            }
            FnArg::Typed(typed) => typed,
        };
        if let Some(kind) = context_kind(&typed.ty) {
            if index != 0 {
                return Err(syn::Error::new_spanned(
                    &typed.ty,
                    "the `FunctionContext` parameter must come first",
                ));
            }
            context = kind;
            continue;
        }
        let ident = match &*typed.pat {
            Pat::Ident(pat) if pat.subpat.is_none() && pat.by_ref.is_none() => pat.ident.clone(),
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "#[memgpt_fn] parameters must be plain names: the name is what the LLM sends",
                ));
            }
        };
        if ident == "request_heartbeat" {
            return Err(syn::Error::new(
                ident.span(),
                "`request_heartbeat` is reserved: #[memgpt_fn] adds it to every non-`terminal` function; \
                 remove or rename this parameter",
            ));
        }
        check_type(&ident, &typed.ty)?;

        let mut docs = Vec::new();
        let mut forwarded = Vec::new();
        let mut kept = Vec::new();
        for attr in typed.attrs.drain(..) {
            if attr.path().is_ident("doc") {
                docs.push(doc_text(&attr)?);
            } else if attr.path().is_ident("serde") || attr.path().is_ident("schemars") {
                forwarded.push(attr);
            } else {
                kept.push(attr);
            }
        }
        typed.attrs = kept;
        params.push(Param {
            ident,
            ty: (*typed.ty).clone(),
            docs,
            forwarded,
        });
    }
    Ok(Signature { context, params })
}

/// `Some` if `ty` is `&FunctionContext<..>` or `&mut FunctionContext<..>`.
fn context_kind(ty: &Type) -> Option<ContextParam> {
    let Type::Reference(reference) = ty else {
        return None;
    };
    let Type::Path(path) = &*reference.elem else {
        return None;
    };
    let last = path.path.segments.last()?;
    if last.ident != "FunctionContext" {
        return None;
    }
    Some(if reference.mutability.is_some() {
        ContextParam::Exclusive
    } else {
        ContextParam::Shared
    })
}

/// Rejects parameter types the LLM cannot send as owned JSON values.
fn check_type(ident: &syn::Ident, ty: &Type) -> syn::Result<()> {
    let unsupported = |what: &str, hint: &str| {
        Err(syn::Error::new_spanned(
            ty,
            format!("parameter `{ident}`: {what} cannot be a #[memgpt_fn] parameter; {hint}"),
        ))
    };
    match ty {
        Type::Reference(_) => unsupported(
            "a reference",
            "arguments are deserialised into owned values, so use an owned type such as `String` or `Vec<T>` \
             (only the first parameter may be a `&FunctionContext`/`&mut FunctionContext`)",
        ),
        Type::ImplTrait(_) => unsupported("`impl Trait`", "use a concrete type"),
        Type::TraitObject(_) => unsupported("a trait object", "use a concrete type"),
        Type::FnPtr(_) => unsupported("a function pointer", "the LLM can only send JSON data"),
        Type::Ptr(_) => unsupported("a raw pointer", "the LLM can only send JSON data"),
        Type::Never(_) => unsupported("`!`", "use a type that has values"),
        Type::Infer(_) => unsupported("`_`", "write the type out"),
        Type::Paren(inner) => check_type(ident, &inner.elem),
        Type::Group(inner) => check_type(ident, &inner.elem),
        Type::Array(inner) => check_type(ident, &inner.elem),
        Type::Slice(_) => unsupported("a slice", "use `Vec<T>`"),
        Type::Tuple(tuple) => tuple.elems.iter().try_for_each(|t| check_type(ident, t)),
        Type::Path(path) => {
            for segment in &path.path.segments {
                if let syn::PathArguments::AngleBracketed(args) = &segment.arguments {
                    for arg in &args.args {
                        match arg {
                            syn::GenericArgument::Lifetime(_) => {
                                return unsupported(
                                    "a type with a lifetime",
                                    "arguments are deserialised into owned values, so use an owned type",
                                );
                            }
                            syn::GenericArgument::Type(inner) => check_type(ident, inner)?,
                            _ => {}
                        }
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The text of one `#[doc = "..."]` attribute.
pub(crate) fn doc_text(attr: &Attribute) -> syn::Result<String> {
    match &attr.meta {
        Meta::NameValue(nv) => match &nv.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => Ok(s.value()),
            other => Err(syn::Error::new_spanned(
                other,
                "#[memgpt_fn] needs doc comments to be string literals",
            )),
        },
        other => Err(syn::Error::new_spanned(other, "malformed doc attribute")),
    }
}

/// Joins doc lines: wrapped lines are unwrapped, list items keep their own line, and paragraphs
/// (separated by blank lines) are joined with `paragraph_separator`.
pub(crate) fn join_docs(lines: &[String], paragraph_separator: &str) -> String {
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current = String::new();
    // `split`, not `lines`: a blank `///` line is an empty string, which has no `lines()`.
    for line in lines.iter().flat_map(|l| l.split('\n')) {
        let line = line.trim();
        if line.is_empty() {
            if !current.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
            continue;
        }
        if !current.is_empty() {
            let list_item = line.starts_with("- ") || line.starts_with("* ");
            current.push(if list_item { '\n' } else { ' ' });
        }
        current.push_str(line);
    }
    if !current.is_empty() {
        paragraphs.push(current);
    }
    paragraphs.join(paragraph_separator)
}

#[cfg(test)]
mod tests {
    use super::join_docs;

    fn docs(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|line| (*line).to_owned()).collect()
    }

    #[test]
    fn blank_doc_lines_separate_paragraphs() {
        // `/// First line` `/// wrapped.` `///` `/// Second.` arrive as these attributes.
        let lines = docs(&[" First line", " wrapped.", "", " Second."]);
        assert_eq!(join_docs(&lines, "\n\n"), "First line wrapped.\n\nSecond.");
        assert_eq!(join_docs(&lines, " "), "First line wrapped. Second.");
    }

    #[test]
    fn list_items_and_block_comments() {
        let lines = docs(&[" Modes:", " - fast", " - exact", ""]);
        assert_eq!(join_docs(&lines, "\n\n"), "Modes:\n- fast\n- exact");
        // A `/** .. */` comment arrives as one attribute with embedded newlines.
        let lines = docs(&["\n Summary.\r\n\n Details\n here.\n"]);
        assert_eq!(join_docs(&lines, "\n\n"), "Summary.\n\nDetails here.");
    }
}
