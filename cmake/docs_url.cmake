# CAPSULE_DOCS_URL: where the docs/ directory is published, for the helpUri of every SARIF rule
# (`<url>lint-rules.md#<rule>`) and the tool's informationUri. Code scanning ignores relative
# URIs, so it must be an absolute http(s) URI; it is compiled into a C++ string and a JSON string,
# so only characters that need no escaping in either are allowed. Empty omits both URIs.
# docs/decisions.md, "SARIF for code scanning (issue 12)", says why the default is a placeholder.

# Sets ${out_var} to an error message when `url` is not acceptable, else to empty.
function(capsule_check_docs_url url out_var)
  set(error "")
  if(NOT url STREQUAL "" AND NOT url MATCHES "^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/:@+-]*)?$")
    string(CONCAT error "CAPSULE_DOCS_URL must be empty or an absolute http(s) URI of letters, digits and ._~%/:@+- "
                        "without query or fragment (it gets `lint-rules.md#<rule>` appended), got \"${url}\"")
  endif()
  set(${out_var} "${error}" PARENT_SCOPE)
endfunction()

# The value with a trailing `/`, so `lint-rules.md` is appended inside the docs directory.
function(capsule_docs_url_base url out_var)
  if(NOT url STREQUAL "" AND NOT url MATCHES "/$")
    string(APPEND url "/")
  endif()
  set(${out_var} "${url}" PARENT_SCOPE)
endfunction()
