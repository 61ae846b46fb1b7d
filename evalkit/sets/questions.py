"""Build a QuestionSet from a validated document: duplicate question ids, tolerances, corpus path."""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import Issue
from evalkit.records import Question, QuestionSet, RetrievalTolerances
from evalkit.sets.prompts import tolerance_issues, written_tolerance
from evalkit.sets.yamldoc import Document, duplicate_ids


def question_set_issues(doc: Document) -> list[Issue]:
    data = doc.data if isinstance(doc.data, dict) else {}
    issues = tolerance_issues(doc, data, ("max_top1_drop", "max_top3_drop"))
    return issues + duplicate_ids(doc, "questions", "question")[0]


def build_question_set(doc: Document, path: Path) -> QuestionSet:
    data = doc.data
    questions = tuple(
        Question(
            id=q["id"],
            question=q["question"],
            form=q["form"],
            expected=tuple(dict.fromkeys(q["expected"])),
            hard_class=q.get("hard_class"),
            answer_gist=q.get("answer_gist"),
        )
        for q in data["questions"]
    )
    defaults = RetrievalTolerances()
    corpus = data.get("corpus")
    return QuestionSet(
        id=data["id"],
        name=data["name"],
        questions=questions,
        path=path,
        description=data.get("description"),
        corpus=(path.parent / corpus) if corpus else None,
        corpus_line=doc.position(("corpus",))[0] if corpus else 0,
        tolerances=RetrievalTolerances(
            max_top1_drop=written_tolerance(doc, "tolerances", "max_top1_drop", defaults.max_top1_drop),
            max_top3_drop=written_tolerance(doc, "tolerances", "max_top3_drop", defaults.max_top3_drop),
        ),
    )
