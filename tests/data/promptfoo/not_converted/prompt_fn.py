def make_prompt(context):
    return f"Reply to: {context['vars']['message']}"
