"""Script the server's two pages share (the live page and the API docs page): the request
headers, with the API key the user typed.

Example:
    ```python
    explorer_page(title, legend, None, body=body, data=data, script=HEADERS_JS + own_script,
                  css=css)
    ```
"""

HEADERS_JS = r"""
function headers(json) {
  const h = {};
  if (json) h["content-type"] = "application/json";
  const key = document.getElementById("key").value.trim();
  if (key) h["authorization"] = "Bearer " + key;
  return h;
}
"""
