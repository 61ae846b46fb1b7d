"""A promptfoo python assertion (get_assert(output, context)) that evalkit can call alike."""


def get_assert(output, context):
    return "open" in output.lower() and len(context["vars"]) >= 0
