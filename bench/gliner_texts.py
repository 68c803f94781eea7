"""The texts of compare_gliner.py: --texts texts of 180-220 words (GLiNER's whitespace splitter's words) made of
sentences with capitalized names, places, organizations and dates, from a fixed-seed generator."""
import random
import re

WORD_RE = re.compile(r"\w+(?:[-_]\w+)*|\S")  # GLiNER's WhitespaceTokenSplitter

FIRST = ("Anna Peter Maria John Laura Ahmed Chen Sofia Lucas Elena David Fatima Marco Julia Tomas Amira Oliver "
         "Hannah Diego Priya Noah Ingrid Kenji Clara Samuel").split()
LAST = ("Smith Novak Garcia Okafor Schmidt Rossi Tanaka Kowalski Dubois Haddad Larsen Silva Moreau Ivanova Patel "
        "Jensen Costa Weber Nakamura Fischer").split()
PLACES = ("Berlin Nairobi Lima Toronto Madrid Oslo Kyoto Cairo Lisbon Warsaw Dublin Seoul Quito Prague Vienna "
          "Chicago Manila Dakar Geneva Perth").split() + ["New Delhi", "Buenos Aires", "Cape Town", "San Diego"]
ORGS = ["the United Nations", "Google", "the Red Cross", "Siemens", "the World Bank", "Nokia", "Oxfam",
        "the European Space Agency", "Toyota", "the University of Leeds", "Greenpeace", "Deutsche Bahn",
        "the Museum of Modern Art", "Unilever", "the National Health Service", "Airbus"]
EVENTS = ["the Climate Summit", "the World Cup", "the Olympic Games", "the Book Fair", "the Film Festival",
          "the Trade Conference", "the Jazz Festival", "the Science Week"]
MONTHS = ("January February March April May June July August September October November December").split()
ADJ = ("new old small large local public early final annual quiet busy careful strong recent main").split()
NOUNS = ("report project plan budget meeting study office program network school bridge station market museum "
         "festival contract agreement survey").split()
VERBS = ("visited joined met praised criticized announced opened presented signed discussed reviewed "
         "described").split()
TEMPLATES = [
    "{person} {verb} {org} in {place} on {date} .",
    "In {date} , {person} and {person2} {verb} the {adj} {noun} of {org} .",
    "The {adj} {noun} was {verb} by {person} during {event} in {place} .",
    "{org} said that {person} would lead the {adj} {noun} in {place} from {date} .",
    "After {event} , {person} travelled from {place} to {place2} to meet {person2} .",
    "According to {person} , the {noun} in {place} is {adj} and the {noun2} is {adj2} .",
    "{person} , who works for {org} , {verb} the {adj} {noun} on {date} .",
    "Many people in {place} still remember {event} and the {adj} {noun} that {org} {verb} .",
]


def make_texts(count, seed=16, low=180, high=220):
    """count texts of low..high words (GLiNER's splitter), sentences with names, places, organizations, dates."""
    rng = random.Random(seed)

    def person():
        return f"{rng.choice(FIRST)} {rng.choice(LAST)}" if rng.random() < 0.7 else rng.choice(FIRST)

    def date():
        r = rng.random()
        if r < 0.4:
            return f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.randint(1950, 2025)}"
        return f"{rng.choice(MONTHS)} {rng.randint(1950, 2025)}" if r < 0.8 else str(rng.randint(1950, 2025))

    texts = []
    for _ in range(count):
        target = rng.randint(low, high)
        words = []
        while len(words) < target:
            s = rng.choice(TEMPLATES).format(
                person=person(), person2=person(), org=rng.choice(ORGS), place=rng.choice(PLACES),
                place2=rng.choice(PLACES), date=date(), event=rng.choice(EVENTS), adj=rng.choice(ADJ),
                adj2=rng.choice(ADJ), noun=rng.choice(NOUNS), noun2=rng.choice(NOUNS), verb=rng.choice(VERBS))
            s = s[0].upper() + s[1:]
            words += WORD_RE.findall(s)
        texts.append(" ".join(words[:target]))
    return texts


def word_count(text):
    return len(WORD_RE.findall(text))
