"""sentence-transformers' MultipleNegativesRankingLoss on n-tuples (issue 40: training on the
n-tuples `nest mine --output-format n-tuple` writes). Run once; the output is committed.

    /path/to/venv/bin/python tests/reference/st_ntuple.py    # from the repository root, after scripts/setup.sh models

The real all-MiniLM-L6-v2 in eval mode, scale 20, on 6 rows of (anchor, positive, negative_1,
negative_2, negative_3), and the same rows cut to (anchor, positive, negative_1). The loss scores
each anchor against every positive and every negative of the batch (`torch.cat(embeddings[1:])`).
Writes tests/fixtures/objectives/st_ntuple.json: the rows and both values.
"""
import json
import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "objectives", "st_ntuple.json")

ROWS = [
    ("A man is playing a guitar.", "A person plays an instrument.", "A woman is sleeping.",
     "A man is playing a piano.", "A guitar lies on the floor."),
    ("Two dogs run across a field.", "Animals are running outside.", "The dogs are asleep indoors.",
     "Two cats sit on a fence.", "A field of flowers in spring."),
    ("A child is eating an apple.", "A kid eats fruit.", "A child is crying loudly in a car.",
     "An apple tree in an orchard.", "A woman is eating a sandwich."),
    ("The market was crowded this morning.", "Many people were at the market.", "The market was empty.",
     "The stock market fell this morning.", "A crowd gathered at the stadium."),
    ("A chef slices onions in a kitchen.", "Someone is cooking.", "A chef is swimming in the sea.",
     "Onions are sold at the market.", "A man cleans the kitchen floor."),
    ("Three people climb a snowy mountain.", "Hikers are on a mountain.", "People sunbathe on a beach.",
     "Snow falls on a quiet town.", "Three people sit in a cafe."),
]


def main():
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(os.path.join(ROOT, "models", "all-MiniLM-L6-v2"), device="cpu")
    model.eval()
    loss = MultipleNegativesRankingLoss(model, scale=20.0)

    def value(width):
        cols = [model.tokenize([r[k] for r in ROWS]) for k in range(width)]
        with torch.no_grad():
            return loss(cols, None).item()

    out = {"rows": ROWS, "mnrl_5": value(5), "mnrl_3": value(3)}
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}))


if __name__ == "__main__":
    main()
