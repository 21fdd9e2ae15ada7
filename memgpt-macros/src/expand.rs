//! Code generation: the arguments struct, the schema, the dispatch wrapper and the registration.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::args::FnArgs;
use crate::resolve::runtime_crate;
use crate::signature::{self, ContextParam};

const HEARTBEAT_DOC: &str = "true: run again right after this call, to chain more calls.";

pub(crate) fn expand(args: FnArgs, mut item: syn::ItemFn) -> syn::Result<TokenStream> {
    let sig = signature::analyse(&mut item)?;
    let root = runtime_crate()?;
    let root_str = root.to_string().replace(' ', "");

    let fn_ident = item.sig.ident.clone();
    let (name, name_span) = match &args.name {
        Some(lit) => (lit.value(), lit.span()),
        None => (
            fn_ident.to_string().trim_start_matches("r#").to_owned(),
            fn_ident.span(),
        ),
    };
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(syn::Error::new(
            name_span,
            format!("invalid function name `{name}`: use 1 to 64 letters, digits, `_` or `-`"),
        ));
    }

    let doc_lines = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .map(signature::doc_text)
        .collect::<syn::Result<Vec<_>>>()?;
    let description = signature::join_docs(&doc_lines, "\n\n");
    if description.is_empty() {
        return Err(syn::Error::new(
            fn_ident.span(),
            format!("add a doc comment to `{fn_ident}`: it becomes the description the LLM reads"),
        ));
    }
    let terminal = args.terminal.is_some();

    // The arguments struct: one field per parameter, plus the heartbeat flag.
    let fields = sig.params.iter().map(|p| {
        let ident = &p.ident;
        let ty = &p.ty;
        let doc = signature::join_docs(&p.docs, " ");
        let doc_attr = (!doc.is_empty()).then(|| quote!(#[doc = #doc]));
        let forwarded = &p.forwarded;
        quote! { #doc_attr #(#forwarded)* #ident: #ty, }
    });
    // A terminal function has no heartbeat parameter in its schema, but models trained on
    // MemGPT often send one anyway: accept and ignore it rather than fail the call.
    let heartbeat_field = if terminal {
        quote! { #[schemars(skip)] #[serde(default)] request_heartbeat: ::std::option::Option<bool>, }
    } else {
        quote! { #[doc = #HEARTBEAT_DOC] request_heartbeat: bool, }
    };
    let heartbeat_value = if terminal {
        quote!(false)
    } else {
        quote!(__args.request_heartbeat)
    };

    // Type checks that point at the user's own tokens. They are emitted before the arguments
    // struct, so rustc reports them before the errors of the serde and schemars derives.
    let param_checks = sig.params.iter().map(|p| {
        let ty = &p.ty;
        quote_spanned! {ty.span()=> #root::__private::assert_parameter::<#ty>(); }
    });
    // The result conversion names the return type, spanned on the user's tokens, so a type that
    // is not `IntoFunctionOutput` gets one error there, with our message.
    let into_output = match &item.sig.output {
        syn::ReturnType::Default => {
            quote! { #root::__private::into_function_output::<()>(__output) }
        }
        syn::ReturnType::Type(_, ty) => quote_spanned! {ty.span()=>
            #root::__private::into_function_output::<#ty>(__output)
        },
    };

    let context_arg = match sig.context {
        ContextParam::None => None,
        ContextParam::Shared => Some(quote!(&*__ctx,)),
        ContextParam::Exclusive => Some(quote!(__ctx,)),
    };
    let context_binding = if context_arg.is_some() {
        quote!(__ctx)
    } else {
        quote!(_)
    };
    let call_args = sig.params.iter().map(|p| {
        let ident = &p.ident;
        quote!(__args.#ident)
    });

    let serde_path = format!("{root_str}::__private::serde");
    let schemars_path = format!("{root_str}::__private::schemars");
    // An injective mapping of the name into an identifier, so `a-b` and `a_b` stay distinct.
    let guard = format_ident!(
        "__memgpt_function_named_{}",
        name.replace('_', "_u").replace('-', "_h"),
        span = name_span
    );
    let vis = &item.vis;
    // Two #[memgpt_fn]s registering the same name in one module collide here, at compile time,
    // and the error underlines both names. (Across modules and crates,
    // `FunctionRegistry::linked` reports the duplicate.)
    let guard_item = quote_spanned! {name_span=>
        #[doc(hidden)]
        #[allow(non_upper_case_globals, dead_code)]
        #vis const #guard: () = ();
    };

    Ok(quote! {
        #item

        #guard_item

        const _: () = {
            #[allow(dead_code)]
            fn __memgpt_checks() {
                #(#param_checks)*
            }

            #[derive(#root::__private::serde::Deserialize, #root::__private::schemars::JsonSchema)]
            #[serde(crate = #serde_path, deny_unknown_fields)]
            #[schemars(crate = #schemars_path)]
            #[allow(non_camel_case_types, dead_code)]
            struct __MemgptArguments {
                #(#fields)*
                #heartbeat_field
            }

            fn __memgpt_parameters() -> #root::__private::serde_json::Value {
                #root::__private::parameters_schema::<__MemgptArguments>()
            }

            fn __memgpt_call<'a, 'b>(
                #context_binding: &'a mut #root::function::FunctionContext<'b>,
                __arguments: #root::__private::serde_json::Value,
            ) -> #root::function::BoxFuture<'a, #root::function::FunctionReturn> {
                ::std::boxed::Box::pin(async move {
                    let __args: __MemgptArguments = match #root::__private::parse_arguments(#name, __arguments) {
                        ::std::result::Result::Ok(args) => args,
                        ::std::result::Result::Err(message) => return #root::function::FunctionReturn::failed(message),
                    };
                    let __heartbeat = #heartbeat_value;
                    let __output = #fn_ident(#context_arg #(#call_args),*).await;
                    #root::function::FunctionReturn {
                        result: #into_output,
                        request_heartbeat: __heartbeat,
                    }
                })
            }

            #[#root::__private::linkme::distributed_slice(#root::__private::FUNCTIONS)]
            #[linkme(crate = #root::__private::linkme)]
            static __MEMGPT_REGISTRATION: #root::function::FunctionDef = #root::function::FunctionDef {
                name: #name,
                description: #description,
                terminal: #terminal,
                module_path: ::std::module_path!(),
                parameters: __memgpt_parameters,
                call: __memgpt_call,
            };
        };
    })
}
