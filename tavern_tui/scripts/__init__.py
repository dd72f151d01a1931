"""Card and global scripts that rewrite text: SillyTavern's Regex extension (`regex_scripts`),
ST-Prompt-Template's EJS templates in a sandboxed JavaScript engine (`templates`), and the
terminal rendering of HTML those scripts produce (`html_text`). Pure logic: no store, no UI."""
