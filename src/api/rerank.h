/* Reranking: POST /rerank, /reranking, /v1/rerank and /v1/reranking as llama.cpp's server
 * answers them (Jina's shape; Hugging Face TEI's when the documents come as `texts`), on an
 * embedding model with pooling rank (a cross-encoder whose head scores a query-document
 * pair). The handler is api_rerank in handlers.h; this header is the pair layout, kept apart
 * so it is testable without a server. */
#ifndef API_RERANK_H
#define API_RERANK_H

#include "platform/platform.h"
#include "text/tokenizer/tokenizer.h"
#include "util/str.h"

/* Appends the tokens of one (query, document) pair to out, laid out as the reranker's
 * description says (platform_model_desc: the rerank template with {query} and {document}
 * replaced, tokenized with special tokens parsed; else bos? query eos? sep? document eos?,
 * the texts tokenized without added or parsed special tokens). d->tokenizer must be set.
 * ERR_OK, or the tokenizer's ERR_NOMEM / ERR_LIMIT (out then holds what it held before). */
int rerank_format_pair(const struct platform_model_desc *d, struct str query, struct str doc,
                       struct tok_ids *out);

#endif
