"""Generate dreamgym's bundled WebShop catalog, deterministically and offline.

Writes, in the upstream WebShop schema (see ``dreamgym/envs/webshop/catalog.py``), to
``dreamgym/data/webshop/`` (or ``--out``):

- ``items_shuffle.json``    list of product dicts (asin, name, full_description, small_description,
                            pricing, images, customization_options, category, query, product_category)
- ``items_ins_v2.json``     asin -> {"attributes": [...]} (+ "instruction", "instruction_attributes" for
                            ~40% of products: the upstream synthetic-goal source)
- ``items_human_ins.json``  asin -> [{"instruction", "instruction_attributes", "instruction_options"}]
- ``splits.json``           {"by": "asin", "train": [...], "val": [...], "test": [...]}: goals are split
                            by their target product, so test products never appear in train goals.

The products come from hand-written product families (query terms) with brand, descriptor, attribute
and option pools; every family holds ~30 products that share words (distractors), and instructions ask
for attributes and option values that only some of them have. Run::

    python scripts/make_webshop_catalog.py --seed 0 --products 1200
"""

from __future__ import annotations

import argparse
import json
import random
import string
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "dreamgym" / "data" / "webshop"

# (category, product_category breadcrumb, brands)
CATEGORIES = {
    "grocery": (
        "Grocery & Gourmet Food",
        [
            "Harvest Lane",
            "Golden Acre",
            "Nature's Pantry",
            "Sunny Fields",
            "Blue Ridge",
            "Mountain Mill",
            "Happy Belly",
            "Urban Kitchen",
        ],
    ),
    "beauty": (
        "Beauty & Personal Care",
        [
            "Lumiere",
            "Pure Bloom",
            "Velvet Rose",
            "Aqua Glow",
            "Botanica",
            "Silk & Stone",
            "Derma Lab",
            "Amara",
        ],
    ),
    "fashion": (
        "Clothing, Shoes & Jewelry",
        [
            "Northway",
            "Urban Stride",
            "Coastline",
            "Maple & Co",
            "Ridge Line",
            "Lark",
            "Summit Wear",
            "Bayside",
        ],
    ),
    "electronics": (
        "Electronics",
        ["Voltix", "Nexon", "Soundwave", "Ankora", "Zentech", "Pixelon", "Ampere", "Orbit"],
    ),
    "home": (
        "Home & Kitchen",
        [
            "Cozy Nest",
            "Hearth & Home",
            "Willow Lane",
            "Casa Verde",
            "Oak Haven",
            "Linen House",
            "Kitchen Pro",
            "Bright Living",
        ],
    ),
    "furniture": (
        "Home & Kitchen",
        [
            "Oak Haven",
            "Nordic Form",
            "Loft Line",
            "Homestead",
            "Urban Nest",
            "Timber & Co",
            "Modern Habitat",
            "Sitwell",
        ],
    ),
    "sports": (
        "Sports & Outdoors",
        [
            "Trail Peak",
            "Ironside",
            "FlexCore",
            "Summit Gear",
            "Aqua Trek",
            "Pulse Fit",
            "Wildpath",
            "Everest",
        ],
    ),
    "pets": (
        "Pet Supplies",
        ["Happy Paws", "Tail Wag", "Purrfect", "Wild Bowl", "Pet Pal", "Fur Real", "Barkley", "Whisker Co"],
    ),
    "toys": (
        "Toys & Games",
        [
            "Play Time",
            "Brick Town",
            "Cuddle Co",
            "Wonder Kids",
            "Tiny Hands",
            "Puzzle Box",
            "Star Toys",
            "Kidzania",
        ],
    ),
    "health": (
        "Health & Household",
        [
            "Vita Well",
            "Pure Health",
            "Nature Prime",
            "Daily Boost",
            "Clear Life",
            "Herbal Roots",
            "Optima",
            "Wellspring",
        ],
    ),
    "office": (
        "Office Products",
        [
            "Inkwell",
            "Paper Trail",
            "Desk Mate",
            "Scribe",
            "Noteworthy",
            "Office Pro",
            "Bright Ideas",
            "Penmark",
        ],
    ),
}

COLORS = [
    "black",
    "white",
    "navy blue",
    "grey",
    "red",
    "pink",
    "green",
    "beige",
    "brown",
    "purple",
    "light blue",
    "olive",
    "yellow",
    "orange",
    "teal",
    "burgundy",
]
SHOE_SIZES = ["6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12"]
CLOTH_SIZES = ["x-small", "small", "medium", "large", "x-large", "xx-large"]

# family: (category, subcategory path, query, title nouns, instruction nouns, descriptors, attributes,
#          option pools, (price low, price high))
F = tuple
FAMILIES: list[F] = [
    (
        "grocery",
        "Beverages › Tea › Herbal",
        "herbal tea",
        ["Herbal Tea", "Herbal Tea Bags"],
        ["herbal tea", "tea bags"],
        ["Chamomile", "Peppermint", "Ginger Lemon", "Hibiscus", "Rooibos", "Lavender", "Turmeric"],
        [
            "caffeine free",
            "organic",
            "non gmo",
            "gluten free",
            "individually wrapped",
            "kosher",
            "natural ingredients",
        ],
        {"size": ["20 count", "40 count", "60 count", "100 count"]},
        (4, 28),
    ),
    (
        "grocery",
        "Beverages › Coffee › Ground Coffee",
        "ground coffee",
        ["Ground Coffee", "Coffee"],
        ["ground coffee", "coffee"],
        ["Dark Roast", "Medium Roast", "Espresso", "French Roast", "Colombian", "Breakfast Blend"],
        ["fair trade", "organic", "low acid", "single origin", "kosher", "100% arabica", "decaf"],
        {
            "size": ["12 ounce", "24 ounce", "2 pound", "5 pound"],
            "flavor name": ["original", "hazelnut", "vanilla", "caramel", "mocha"],
        },
        (7, 45),
    ),
    (
        "grocery",
        "Snack Foods › Bars › Protein",
        "protein bars",
        ["Protein Bars", "Protein Snack Bars"],
        ["protein bars", "snack bars"],
        ["Chocolate", "Peanut Butter", "Almond", "Oat", "Whey"],
        ["gluten free", "high protein", "low sugar", "keto friendly", "plant based", "non gmo", "dairy free"],
        {
            "flavor name": [
                "chocolate chip",
                "peanut butter",
                "cookie dough",
                "mixed berry",
                "salted caramel",
            ],
            "size": ["12 count", "15 count", "24 count"],
        },
        (12, 40),
    ),
    (
        "grocery",
        "Snack Foods › Nuts & Seeds › Trail Mix",
        "trail mix",
        ["Trail Mix", "Nut Mix"],
        ["trail mix", "nut mix"],
        ["Tropical", "Honey Roasted", "Dark Chocolate", "Sea Salt", "Cranberry Almond"],
        [
            "individually wrapped",
            "resealable bag",
            "low sodium",
            "gluten free",
            "no artificial flavors",
            "vegan",
        ],
        {"size": ["1 ounce (pack of 24)", "14 ounce", "30 ounce"]},
        (6, 30),
    ),
    (
        "beauty",
        "Hair Care › Shampoo & Conditioner › Shampoos",
        "shampoo",
        ["Shampoo", "Shampoo and Conditioner Set"],
        ["shampoo", "shampoo and conditioner"],
        ["Argan Oil", "Tea Tree", "Coconut Milk", "Biotin", "Charcoal", "Rosemary Mint"],
        [
            "sulfate free",
            "paraben free",
            "cruelty free",
            "natural ingredients",
            "color safe",
            "for dry hair",
            "hair growth",
        ],
        {
            "size": ["8 fl oz", "16 fl oz", "33.8 fl oz"],
            "scent": ["lavender", "citrus", "unscented", "mint", "vanilla"],
        },
        (7, 35),
    ),
    (
        "beauty",
        "Skin Care › Face › Moisturizers",
        "face moisturizer",
        ["Face Moisturizer", "Facial Cream"],
        ["face moisturizer", "face cream"],
        ["Hydrating", "Vitamin C", "Retinol", "Aloe", "Ceramide", "Green Tea"],
        [
            "fragrance free",
            "for sensitive skin",
            "hyaluronic acid",
            "spf 30",
            "anti aging",
            "oil free",
            "non comedogenic",
        ],
        {"size": ["1.7 oz", "2.5 oz", "3.4 oz"]},
        (9, 48),
    ),
    (
        "beauty",
        "Makeup › Lips › Lipstick",
        "lipstick",
        ["Lipstick", "Liquid Lipstick"],
        ["lipstick", "lip color"],
        ["Velvet", "Satin", "Creamy", "Matte Liquid", "Sheer"],
        [
            "long lasting",
            "matte finish",
            "cruelty free",
            "vegan",
            "moisturizing",
            "waterproof",
            "paraben free",
        ],
        {"color": ["ruby red", "nude", "berry", "coral", "mauve", "pink", "plum", "brick"]},
        (5, 25),
    ),
    (
        "beauty",
        "Hair Care › Extensions, Wigs & Accessories › Hair Extensions",
        "hair extension",
        ["Clip in Hair Extensions", "Hair Extensions"],
        ["hair extension", "hair extensions"],
        ["Straight", "Wavy", "Curly", "Layered", "Thick"],
        ["natural looking", "clip in", "heat resistant", "human hair", "long lasting", "easy to use"],
        {
            "color": ["jet black", "dark brown", "light brown", "blonde", "auburn", "ombre"],
            "size": ["14 inch", "18 inch", "22 inch", "26 inch"],
        },
        (18, 90),
    ),
    (
        "fashion",
        "Men › Shoes › Athletic › Running",
        "running shoes",
        ["Running Shoes", "Walking Shoes"],
        ["running shoes", "sneakers"],
        ["Men's", "Women's", "Trail", "Road", "Cushioned"],
        ["non slip", "breathable", "lightweight", "memory foam", "rubber sole", "arch support", "wide fit"],
        {"color": COLORS[:10], "size": SHOE_SIZES},
        (30, 120),
    ),
    (
        "fashion",
        "Men › Clothing › Shirts › T-Shirts",
        "t-shirt",
        ["T-Shirt", "Crew Neck Tee"],
        ["t-shirt", "tee shirt"],
        ["Men's", "Women's", "Graphic", "Classic", "Vintage", "Athletic"],
        [
            "machine wash",
            "short sleeve",
            "cotton",
            "slim fit",
            "crew neck",
            "moisture wicking",
            "long sleeve",
        ],
        {"color": COLORS, "size": CLOTH_SIZES},
        (9, 35),
    ),
    (
        "fashion",
        "Women › Clothing › Jeans",
        "jeans",
        ["Jeans", "Denim Jeans"],
        ["jeans", "denim jeans"],
        ["Skinny", "Bootcut", "Relaxed", "Mom", "Straight Leg", "Flare"],
        ["slim fit", "stretch", "high waist", "button closure", "machine wash", "straight leg", "distressed"],
        {
            "color": ["light wash", "dark wash", "black", "medium blue", "white", "grey"],
            "size": ["24", "26", "28", "30", "32", "34", "36"],
        },
        (22, 70),
    ),
    (
        "fashion",
        "Women › Clothing › Dresses",
        "dress",
        ["Dress", "Maxi Dress", "Midi Dress"],
        ["dress", "maxi dress"],
        ["Floral", "Wrap", "Summer", "Boho", "Cocktail", "Casual"],
        ["long sleeve", "v neck", "polyester spandex", "floral print", "hand wash", "a line", "with pockets"],
        {"color": COLORS, "size": CLOTH_SIZES},
        (18, 75),
    ),
    (
        "fashion",
        "Men › Clothing › Socks",
        "socks",
        ["Socks", "Crew Socks", "Ankle Socks"],
        ["socks", "athletic socks"],
        ["Athletic", "Wool", "Bamboo", "Compression", "Cotton"],
        ["cushioned", "moisture wicking", "arch support", "cotton blend", "breathable", "odor resistant"],
        {
            "color": ["black", "white", "grey", "assorted", "navy blue"],
            "size": ["small", "medium", "large"],
            "item package quantity": ["3", "6", "10"],
        },
        (8, 30),
    ),
    (
        "electronics",
        "Headphones › Earbud Headphones",
        "wireless earbuds",
        ["Wireless Earbuds", "Bluetooth Earbuds"],
        ["wireless earbuds", "bluetooth earbuds"],
        ["Pro", "Sport", "Mini", "Bass", "Air"],
        [
            "noise cancelling",
            "bluetooth 5.3",
            "waterproof",
            "long battery life",
            "charging case",
            "hands free",
            "touch control",
        ],
        {"color": ["black", "white", "blue", "pink", "green"]},
        (18, 130),
    ),
    (
        "electronics",
        "Cell Phones & Accessories › Chargers & Power Adapters",
        "phone charger",
        ["Wall Charger", "USB C Charger"],
        ["phone charger", "wall charger"],
        ["20W", "30W", "45W", "65W", "Dual Port"],
        ["fast charging", "usb c", "compact design", "overheat protection", "foldable plug", "for iphone"],
        {"color": ["black", "white"], "item package quantity": ["1", "2", "3"]},
        (9, 45),
    ),
    (
        "electronics",
        "Computers & Accessories › Cables › USB Cables",
        "usb c cable",
        ["USB C Cable", "Charging Cable"],
        ["usb c cable", "charging cable"],
        ["Braided", "Right Angle", "Flat", "Nylon", "Coiled"],
        ["fast charging", "braided", "durable", "data sync", "high speed", "tangle free"],
        {"color": ["black", "white", "grey", "red", "blue"], "size": ["1 ft", "3 ft", "6 ft", "10 ft"]},
        (6, 22),
    ),
    (
        "electronics",
        "Portable Audio & Video › Portable Speakers",
        "bluetooth speaker",
        ["Bluetooth Speaker", "Portable Speaker"],
        ["bluetooth speaker", "portable speaker"],
        ["Mini", "Outdoor", "Party", "Shower", "Boom"],
        [
            "portable",
            "waterproof",
            "long battery life",
            "stereo sound",
            "easy to carry",
            "built in microphone",
        ],
        {"color": ["black", "blue", "red", "grey", "camo"]},
        (20, 150),
    ),
    (
        "electronics",
        "Cell Phones & Accessories › Power Banks",
        "power bank",
        ["Power Bank", "Portable Charger"],
        ["power bank", "portable charger"],
        ["10000mAh", "20000mAh", "Slim", "Solar", "Magnetic"],
        ["fast charging", "usb c", "high capacity", "led display", "compact design", "airline approved"],
        {"color": ["black", "white", "blue", "pink"]},
        (15, 60),
    ),
    (
        "home",
        "Home Décor Products › Decorative Pillows › Throw Pillow Covers",
        "throw pillow covers",
        ["Throw Pillow Covers", "Cushion Covers"],
        ["throw pillow covers", "pillow covers"],
        ["Velvet", "Boho", "Linen", "Farmhouse", "Geometric", "Striped"],
        ["machine washable", "hidden zipper", "soft velvet", "double sided", "for living room", "set of 2"],
        {"color": COLORS[:12], "size": ["16 x 16 inch", "18 x 18 inch", "20 x 20 inch", "24 x 24 inch"]},
        (9, 35),
    ),
    (
        "home",
        "Bath › Towels › Bath Towels",
        "bath towels",
        ["Bath Towels", "Towel Set"],
        ["bath towels", "towel set"],
        ["Cotton", "Turkish", "Waffle", "Quick Dry", "Luxury"],
        ["highly absorbent", "quick dry", "100% cotton", "machine washable", "hotel quality", "soft"],
        {"color": COLORS[:12], "item package quantity": ["2", "4", "6", "8"]},
        (18, 70),
    ),
    (
        "home",
        "Kitchen & Dining › Dining & Entertaining › Mugs",
        "coffee mug",
        ["Coffee Mug", "Ceramic Mug"],
        ["coffee mug", "ceramic mug"],
        ["Stoneware", "Speckled", "Glass", "Insulated", "Travel"],
        ["dishwasher safe", "microwave safe", "lead free", "large capacity", "with lid", "handmade"],
        {
            "color": ["white", "black", "blue", "green", "pink", "speckled grey"],
            "size": ["12 oz", "16 oz", "20 oz"],
        },
        (8, 32),
    ),
    (
        "home",
        "Bedding › Sheets & Pillowcases › Sheet & Pillowcase Sets",
        "bed sheets",
        ["Bed Sheet Set", "Sheet Set"],
        ["bed sheets", "sheet set"],
        ["Microfiber", "Bamboo", "Egyptian Cotton", "Percale", "Flannel"],
        ["deep pocket", "wrinkle free", "cooling", "machine washable", "hypoallergenic", "breathable"],
        {"color": COLORS[:12], "size": ["twin", "full", "queen", "king", "california king"]},
        (20, 90),
    ),
    (
        "furniture",
        "Furniture › Home Office Furniture › Chairs",
        "office chair",
        ["Office Chair", "Desk Chair"],
        ["office chair", "desk chair"],
        ["Ergonomic", "Mesh", "Executive", "Gaming", "Task"],
        [
            "lumbar support",
            "adjustable height",
            "easy assembly",
            "breathable mesh",
            "swivel",
            "padded armrests",
        ],
        {"color": ["black", "grey", "white", "blue", "pink"]},
        (60, 260),
    ),
    (
        "furniture",
        "Furniture › Living Room Furniture › Bookcases",
        "bookshelf",
        ["Bookshelf", "Bookcase"],
        ["bookshelf", "bookcase"],
        ["Ladder", "Industrial", "Corner", "Cube", "Tall"],
        [
            "easy assembly",
            "engineered wood",
            "space saving",
            "for living room",
            "storage space",
            "metal frame",
        ],
        {
            "color": ["white", "black", "espresso", "rustic brown", "oak"],
            "size": ["3 tier", "4 tier", "5 tier"],
        },
        (40, 190),
    ),
    (
        "furniture",
        "Furniture › Bedroom Furniture › Nightstands",
        "nightstand",
        ["Nightstand", "Bedside Table"],
        ["nightstand", "bedside table"],
        ["Modern", "Farmhouse", "Mid Century", "Rattan", "Floating"],
        ["with drawer", "easy assembly", "solid wood", "usb charging", "for bedroom", "storage space"],
        {"color": ["white", "black", "walnut", "grey", "natural"]},
        (35, 160),
    ),
    (
        "furniture",
        "Furniture › Living Room Furniture › Ottomans",
        "storage ottoman",
        ["Storage Ottoman", "Ottoman Bench"],
        ["storage ottoman", "ottoman"],
        ["Tufted", "Folding", "Round", "Faux Leather", "Velvet"],
        ["foldable", "storage space", "for living room", "easy assembly", "sturdy"],
        {"color": COLORS[:10], "size": ["small", "medium", "large"]},
        (25, 110),
    ),
    (
        "sports",
        "Exercise & Fitness › Yoga › Yoga Mats",
        "yoga mat",
        ["Yoga Mat", "Exercise Mat"],
        ["yoga mat", "exercise mat"],
        ["Cork", "TPE", "Extra Wide", "Travel", "Premium"],
        ["non slip", "extra thick", "eco friendly", "carrying strap", "high density", "sweat resistant"],
        {"color": ["purple", "blue", "black", "pink", "teal", "grey"], "size": ["4mm", "6mm", "10mm"]},
        (15, 60),
    ),
    (
        "sports",
        "Outdoor Recreation › Water Bottles",
        "water bottle",
        ["Water Bottle", "Insulated Bottle"],
        ["water bottle", "insulated water bottle"],
        ["Stainless Steel", "Sports", "Motivational", "Glass", "Wide Mouth"],
        ["bpa free", "leak proof", "insulated", "stainless steel", "dishwasher safe", "with straw"],
        {"color": COLORS[:10], "size": ["18 oz", "24 oz", "32 oz", "40 oz"]},
        (10, 45),
    ),
    (
        "sports",
        "Exercise & Fitness › Strength Training › Resistance Bands",
        "resistance bands",
        ["Resistance Bands", "Exercise Bands"],
        ["resistance bands", "exercise bands"],
        ["Loop", "Fabric", "Tube", "Pull Up", "Mini"],
        ["non slip", "with handles", "for home workout", "durable", "latex free", "carrying bag"],
        {"size": ["light", "medium", "heavy", "set of 5"]},
        (8, 40),
    ),
    (
        "sports",
        "Outdoor Recreation › Camping & Hiking › Tents",
        "camping tent",
        ["Camping Tent", "Dome Tent"],
        ["camping tent", "tent"],
        ["2 Person", "4 Person", "6 Person", "Backpacking", "Pop Up"],
        ["waterproof", "easy setup", "lightweight", "with rainfly", "ventilated", "carry bag"],
        {"color": ["green", "orange", "blue", "grey"]},
        (45, 230),
    ),
    (
        "pets",
        "Dogs › Food › Dry",
        "dog food",
        ["Dry Dog Food", "Dog Food"],
        ["dog food", "dry dog food"],
        ["Adult", "Puppy", "Senior", "Small Breed", "Large Breed"],
        [
            "grain free",
            "high protein",
            "real meat",
            "natural ingredients",
            "no artificial preservatives",
            "made in usa",
        ],
        {
            "flavor name": ["chicken", "beef", "salmon", "lamb", "turkey"],
            "size": ["4 pound", "15 pound", "30 pound"],
        },
        (14, 75),
    ),
    (
        "pets",
        "Cats › Litter & Housebreaking › Litter",
        "cat litter",
        ["Cat Litter", "Clumping Litter"],
        ["cat litter", "clumping cat litter"],
        ["Clay", "Pine", "Tofu", "Crystal", "Multi Cat"],
        ["clumping", "odor control", "low dust", "unscented", "flushable", "lightweight"],
        {"size": ["10 pound", "20 pound", "40 pound"]},
        (9, 40),
    ),
    (
        "pets",
        "Dogs › Collars, Harnesses & Leashes › Leashes",
        "dog leash",
        ["Dog Leash", "Leash"],
        ["dog leash", "leash"],
        ["Reflective", "Retractable", "Rope", "Hands Free", "Training"],
        ["reflective", "heavy duty", "padded handle", "adjustable", "for large dogs", "waterproof"],
        {"color": ["black", "red", "blue", "pink", "orange", "green"], "size": ["4 ft", "6 ft", "16 ft"]},
        (8, 35),
    ),
    (
        "pets",
        "Cats › Toys",
        "cat toys",
        ["Cat Toys", "Interactive Cat Toy"],
        ["cat toys", "cat toy"],
        ["Feather", "Catnip", "Laser", "Tunnel", "Ball Track"],
        ["interactive", "for indoor cats", "safe materials", "durable", "variety pack"],
        {"item package quantity": ["1", "5", "12", "20"]},
        (6, 30),
    ),
    (
        "toys",
        "Building Toys › Building Sets",
        "building blocks",
        ["Building Blocks Set", "Building Bricks"],
        ["building blocks", "building set"],
        ["Classic", "City", "Space", "Castle", "Creative"],
        ["educational", "for kids", "bpa free", "storage box", "stem toy", "compatible with major brands"],
        {"size": ["200 pieces", "500 pieces", "1000 pieces"]},
        (15, 80),
    ),
    (
        "toys",
        "Stuffed Animals & Plush Toys › Plush Figures",
        "plush toy",
        ["Plush Toy", "Stuffed Animal"],
        ["plush toy", "stuffed animal"],
        ["Teddy Bear", "Bunny", "Dinosaur", "Unicorn", "Panda", "Sloth"],
        ["super soft", "machine washable", "gift for kids", "hypoallergenic", "huggable"],
        {
            "color": ["brown", "pink", "white", "grey", "blue", "purple"],
            "size": ["8 inch", "12 inch", "20 inch"],
        },
        (9, 40),
    ),
    (
        "toys",
        "Puzzles › Jigsaw Puzzles",
        "jigsaw puzzle",
        ["Jigsaw Puzzle", "Puzzle"],
        ["jigsaw puzzle", "puzzle"],
        ["Landscape", "Animal", "Map", "Art", "Floral"],
        ["for adults", "thick pieces", "poster included", "no dust", "challenging", "family game"],
        {"size": ["300 pieces", "500 pieces", "1000 pieces", "1500 pieces"]},
        (10, 35),
    ),
    (
        "toys",
        "Games › Board Games",
        "board game",
        ["Board Game", "Strategy Game"],
        ["board game", "family board game"],
        ["Strategy", "Party", "Trivia", "Cooperative", "Word"],
        ["for adults", "family game", "2-6 players", "easy to learn", "travel size", "for kids"],
        {"style": ["standard", "deluxe", "travel"]},
        (12, 60),
    ),
    (
        "health",
        "Vitamins & Dietary Supplements › Multivitamins",
        "multivitamin",
        ["Multivitamin", "Daily Multivitamin"],
        ["multivitamin", "daily vitamins"],
        ["Women's", "Men's", "Kids", "Gummy", "Prenatal"],
        ["gluten free", "non gmo", "vegan", "easy to swallow", "third party tested", "sugar free"],
        {
            "size": ["60 count", "120 count", "240 count"],
            "flavor name": ["unflavored", "mixed fruit", "orange", "berry"],
        },
        (9, 45),
    ),
    (
        "health",
        "Vitamins & Dietary Supplements › Fish Oil",
        "fish oil",
        ["Fish Oil Softgels", "Omega 3 Fish Oil"],
        ["fish oil", "omega 3 supplement"],
        ["Triple Strength", "Wild Alaskan", "Burpless", "Lemon", "Krill"],
        [
            "burp free",
            "high potency",
            "non gmo",
            "third party tested",
            "easy to swallow",
            "sustainably sourced",
        ],
        {"size": ["60 count", "90 count", "180 count"]},
        (12, 48),
    ),
    (
        "health",
        "Oral Care › Toothbrushes › Electric",
        "electric toothbrush",
        ["Electric Toothbrush", "Sonic Toothbrush"],
        ["electric toothbrush", "sonic toothbrush"],
        ["Sonic", "Rechargeable", "Kids", "Travel", "Whitening"],
        ["rechargeable", "smart timer", "travel case", "5 modes", "waterproof", "long battery life"],
        {"color": ["white", "black", "pink", "blue"]},
        (20, 95),
    ),
    (
        "health",
        "Medical Supplies & Equipment › Heating Pads",
        "heating pad",
        ["Heating Pad", "Electric Heating Pad"],
        ["heating pad", "electric heating pad"],
        ["Extra Large", "Neck", "Moist Heat", "Weighted", "Microwavable"],
        ["auto shut off", "machine washable", "fast heating", "for back pain", "soft flannel"],
        {"color": ["grey", "blue", "beige"], "size": ["12 x 24 inch", "20 x 24 inch", "33 x 17 inch"]},
        (18, 55),
    ),
    (
        "office",
        "Writing & Correction Supplies › Pens › Gel Pens",
        "gel pens",
        ["Gel Pens", "Gel Ink Pens"],
        ["gel pens", "gel ink pens"],
        ["Retractable", "Fine Point", "Glitter", "Pastel", "Quick Dry"],
        ["quick dry", "fine point", "smooth writing", "assorted colors", "retractable", "comfort grip"],
        {"color": ["black", "blue", "red", "assorted"], "item package quantity": ["6", "12", "24", "48"]},
        (6, 30),
    ),
    (
        "office",
        "Paper › Notebooks & Writing Pads › Notebooks",
        "notebook",
        ["Notebook", "Spiral Notebook", "Journal"],
        ["notebook", "journal"],
        ["Dotted", "Lined", "Leather", "Grid", "Kraft"],
        ["college ruled", "spiral bound", "thick paper", "hardcover", "100 sheets", "elastic closure"],
        {"color": ["black", "blue", "green", "pink", "brown"], "size": ["a5", "b5", "letter size"]},
        (6, 28),
    ),
    (
        "office",
        "Desk Accessories & Workspace Organizers › Desk Organizers",
        "desk organizer",
        ["Desk Organizer", "Desktop Organizer"],
        ["desk organizer", "desktop organizer"],
        ["Mesh", "Wooden", "Rotating", "Acrylic", "Drawer"],
        ["with drawer", "space saving", "sturdy", "easy assembly", "for home office", "multi compartment"],
        {"color": ["black", "white", "silver", "rose gold", "natural wood"]},
        (12, 50),
    ),
    (
        "office",
        "Office Electronics › Calculators",
        "calculator",
        ["Calculator", "Scientific Calculator"],
        ["calculator", "scientific calculator"],
        ["Scientific", "Graphing", "Desktop", "Solar", "Pocket"],
        ["large display", "solar powered", "battery included", "for school", "big buttons"],
        {"color": ["black", "white", "blue", "pink"]},
        (8, 120),
    ),
]

ATTR_LINES = [
    "{A}: {a} for everyday use, as promised.",
    "{A} - made with care so you get {a} every time.",
    "{A}: customers choose it because it is {a}.",
    "Designed to be {a}; {A} quality you can feel.",
]
DESC = [
    "The {brand} {title_l} is {a1} and {a2}. {extra}",
    "Meet the {title_l} from {brand}: {a1}, {a2} and built to last. {extra}",
    "{brand} makes this {noun_l} {a1}. It is also {a2}. {extra}",
]
EXTRA = [
    "A great gift idea.",
    "Satisfaction guaranteed.",
    "Loved by thousands of customers.",
    "Ships in recyclable packaging.",
    "Backed by a one year warranty.",
    "Perfect for daily use.",
]
INSTR = [
    "i need {attrs} {noun}{opts}",
    "i am looking for {attrs} {noun}{opts}",
    "i want to buy {noun} that is {attrs_and}{opts}",
    "find me {attrs} {noun}{opts}",
    "i'm looking for a {noun} which is {attrs_and}{opts}",
    "can you help me find {attrs} {noun}{opts}",
    "i would like {noun} that are {attrs_and}{opts}",
]
OPT_PHRASE = {
    "color": ["in {v} color", "{v} colored", "in the color {v}"],
    "size": ["in size {v}", "size {v}", "in {v}"],
    "flavor name": ["in {v} flavor", "{v} flavored"],
    "scent": ["with {v} scent", "in {v} scent"],
    "item package quantity": ["in a pack of {v}", "pack of {v}"],
    "style": ["in {v} style", "the {v} edition"],
}


def _asin(rng: random.Random, used: set[str]) -> str:
    while True:
        a = "B0" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(8))
        if a not in used:
            used.add(a)
            return a


def _product(
    rng: random.Random, fam: F, used_asins: set[str], used_titles: set[str]
) -> tuple[dict, list[str]]:
    cat, sub, query, nouns, _inouns, descs, attr_pool, opt_pools, (plo, phi) = fam
    top, brands = CATEGORIES[cat]
    attrs = rng.sample(attr_pool, rng.randint(3, min(5, len(attr_pool))))
    brand = rng.choice(brands)
    for tries in range(50):
        desc = rng.choice(descs)
        noun = rng.choice(nouns)
        title = f"{brand} {desc} {noun}"
        if rng.random() < 0.6:
            title += ", " + attrs[0].title()
        if tries > 3:
            title += f" {rng.choice(['Plus', 'Max', 'Lite', 'Classic', 'Select', 'Essential', '2.0', 'Pro'])}"
        if tries > 10:
            title += f" {rng.randint(2, 99)}"
        if title not in used_titles:
            used_titles.add(title)
            break
    opts = {}
    for name, pool in opt_pools.items():
        if rng.random() < 0.12 and len(opt_pools) > 1:
            continue
        k = rng.randint(min(2, len(pool)), min(6, len(pool)))
        chosen = set(rng.sample(pool, k))
        opts[name] = [v for v in pool if v in chosen]
    lo = round(rng.uniform(plo, phi), 2)
    pricing = f"${lo:.2f}"
    if opts and rng.random() < 0.5:
        pricing += f" - ${lo * rng.uniform(1.1, 1.6):.2f}"
    bullets = [rng.choice(ATTR_LINES).format(A=a.upper(), a=a) for a in attrs[1:]]
    bullets.append(f"WHAT YOU GET: {title}, from {brand}.")
    rng.shuffle(bullets)
    description = rng.choice(DESC).format(
        brand=brand,
        title_l=f"{desc} {noun}".lower(),
        noun_l=noun.lower(),
        a1=attrs[-1],
        a2=attrs[len(attrs) // 2],
        extra=rng.choice(EXTRA),
    )
    asin = _asin(rng, used_asins)
    product = {
        "asin": asin,
        "name": title,
        "full_description": description,
        "small_description": bullets,
        "pricing": pricing,
        "images": [f"{asin.lower()}.jpg"],
        "customization_options": (
            {
                n.title() if n == "color" else n: [
                    {"value": v.title() if n == "color" else v, "image": None} for v in vs
                ]
                for n, vs in opts.items()
            }
            or None
        ),
        "category": cat,
        "query": query,
        "product_category": f"{top} › {sub}",
    }
    return product, attrs


def _human_instructions(rng: random.Random, fam: F, product: dict, attrs: list[str], n: int) -> list[dict]:
    inouns = fam[4]
    descs = fam[5]
    title_desc = next((d for d in descs if d in product["name"]), "")
    opts = {
        k.lower(): [o["value"].lower() for o in v]
        for k, v in (product["customization_options"] or {}).items()
    }
    out, seen = [], set()
    for _ in range(n * 4):
        if len(out) >= n:
            break
        ia = rng.sample(attrs, rng.randint(1, min(3, len(attrs))))
        names = [k for k in opts if rng.random() < 0.8]
        chosen = {k: rng.choice(opts[k]) for k in names}
        key = (tuple(sorted(ia)), tuple(sorted(chosen.items())))
        if key in seen:
            continue
        seen.add(key)
        noun = rng.choice(inouns)
        if title_desc and rng.random() < 0.4:
            noun = f"{title_desc.lower()} {noun}"
        opt_txt = [rng.choice(OPT_PHRASE[k]).format(v=v) for k, v in chosen.items()]
        opts_s = (", " if rng.random() < 0.5 else " ") + " and ".join(opt_txt) if opt_txt else ""
        text = rng.choice(INSTR).format(
            attrs=" ".join(ia), attrs_and=" and ".join(ia), noun=noun, opts=opts_s
        )
        out.append(
            {"instruction": text, "instruction_attributes": ia, "instruction_options": list(chosen.values())}
        )
    return out


def build(seed: int = 0, n_products: int = 1200, ins_per_product: float = 3.0) -> dict:
    """Build the four files' contents as python objects (see module docstring)."""
    rng = random.Random(seed)
    used_asins: set[str] = set()
    used_titles: set[str] = set()
    products, ins_v2, human = [], {}, {}
    for i in range(n_products):
        fam = FAMILIES[i % len(FAMILIES)]
        product, attrs = _product(rng, fam, used_asins, used_titles)
        products.append(product)
        rec: dict = {"attributes": attrs}
        if rng.random() < 0.4:
            ia = rng.sample(attrs, min(len(attrs), rng.randint(2, 3)))
            rec["instruction"] = f"Find me {ia[0]} {fam[2]} with {', '.join(ia[1:])}"
            rec["instruction_attributes"] = ia
        ins_v2[product["asin"]] = rec
        n = max(1, int(ins_per_product + rng.choice([-1, 0, 0, 1])))
        human[product["asin"]] = _human_instructions(rng, fam, product, attrs, n)
    rng.shuffle(products)
    asins = [p["asin"] for p in products]
    order = list(asins)
    random.Random(seed + 1).shuffle(order)
    n_test, n_val = int(0.18 * len(order)), int(0.12 * len(order))
    splits = {
        "by": "asin",
        "seed": seed,
        "test": sorted(order[:n_test]),
        "val": sorted(order[n_test : n_test + n_val]),
        "train": sorted(order[n_test + n_val :]),
    }
    return {
        "items_shuffle.json": products,
        "items_ins_v2.json": ins_v2,
        "items_human_ins.json": human,
        "splits.json": splits,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--products", type=int, default=1200)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    files = build(args.seed, args.products)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, obj in files.items():
        (args.out / name).write_text(
            json.dumps(obj, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
        )
    n_ins = sum(len(v) for v in files["items_human_ins.json"].values())
    sp = files["splits.json"]
    test_ins = sum(len(files["items_human_ins.json"][a]) for a in sp["test"])
    print(
        f"wrote {len(files['items_shuffle.json'])} products, {n_ins} human instructions "
        f"({test_ins} on test products), {len({p['category'] for p in files['items_shuffle.json']})} categories "
        f"to {args.out}"
    )


if __name__ == "__main__":
    main()
