"""Builds life_qa.json: long multi-session conversations (English and Chinese) for
scripts/bench/search_quality.py, written for this repository and generated deterministically.

Each conversation is one person talking with an assistant over about ten dated sessions (one per
day, days apart). A few storylines run through it — a pet, a class, a trip, a job, an injury, a
wedding, a book — each told in two or three turns in different sessions, in relative time
("yesterday", "last week", "上周", "昨天"), among small talk and distractor turns that share the
storyline's words (a neighbour's dog, a friend's trip). Questions are worded unlike the turns:

- single-hop: one turn holds the answer;
- temporal: "when …" (the answer needs the turn's date) or a question that names a month, where
  only the turn of that month answers;
- multi-hop: the question names the storyline, the answering turn names only its detail (the dog's
  name, the teacher's name); the evidence is both turns, and only the answering one counts as found
  (`answer_turns`; `evidence_turns` lists both);
- adversarial: a false premise (a cat instead of the dog, a brother instead of the sister); the
  evidence is the turn that shows what was really said.

Run: python scripts/bench/data/make_life_qa.py
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

SESSIONS = 10
EN_PEOPLE = [("Maya", "she"), ("Daniel", "he"), ("Priya", "she"), ("Tom", "he"), ("Elena", "she"), ("Samir", "he")]
ZH_PEOPLE = ["李娜", "王磊", "陈静", "张伟", "刘洋", "赵敏"]
EN_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
             "November", "December"]
ZH_MONTHS = ["一月", "二月", "三月", "四月", "五月", "六月", "七月", "八月", "九月", "十月", "十一月", "十二月"]

VALUES = {
    "en": {
        "breed": ["beagle", "border collie", "greyhound", "corgi", "dachshund", "labrador"],
        "pet": ["Biscuit", "Pepper", "Juniper", "Waffles", "Nori", "Pickle"],
        "treat": ["frozen carrots", "peanut butter", "a squeaky duck", "an old sock", "lavender spray", "warm milk"],
        "hobby": ["pottery", "watercolour", "salsa", "woodworking", "calligraphy", "rock climbing"],
        "teacher": ["Mr. Okafor", "Ms. Lindqvist", "Mr. Haddad", "Ms. Moreau", "Mr. Tanaka", "Ms. Ruiz"],
        "piece": ["a blue teapot", "a harbour painting", "the final routine", "a walnut stool", "a poem scroll",
                  "the overhang route"],
        "city": ["Lisbon", "Kyoto", "Reykjavik", "Marrakesh", "Vancouver", "Tbilisi"],
        "sight": ["the tram up the hill", "the bamboo forest", "the black sand beach", "the spice market",
                  "the sea wall", "the sulphur baths"],
        "role": ["team lead", "senior analyst", "head of design", "operations manager", "staff engineer",
                 "product owner"],
        "company": ["Northwind", "Bluepeak", "Larkspur Labs", "Ferrow & Co", "Kestrel Health", "Odeon Media"],
        "team": ["four", "six", "eight", "three", "five", "seven"],
        "project": ["a billing rewrite", "the new mobile app", "a warehouse audit", "the hospital portal",
                    "a customer survey", "the podcast launch"],
        "sport": ["basketball", "tennis", "football", "volleyball", "badminton", "squash"],
        "physio": ["Dr. Brennan", "Dr. Achebe", "Dr. Novak", "Dr. Sato", "Dr. Ferreira", "Dr. Kowalski"],
        "weeks": ["three", "five", "six", "four", "two", "eight"],
        "sibling": ["Lucy", "Hannah", "Grace", "Olivia", "Chloe", "Nadia"],
        "venue": ["a vineyard", "a lighthouse", "a botanical garden", "an old barn", "a lake house", "a rooftop"],
        "spouse": ["Marco", "Felix", "Jonah", "Idris", "Mateo", "Arjun"],
        "book": ["The Salt Road", "Glass Orchards", "Winter Ledger", "The Quiet Engine", "Paper Tides",
                 "North of Nowhere"],
        "author": ["Ines Calder", "Rafe Holloway", "Mira Osei", "Tobias Wren", "Lena Vasquez", "Omar Sable"],
        "twist": ["the lighthouse keeper was the narrator", "the twins swapped letters", "the map was forged",
                  "the engine never existed", "the letters were unsent", "the town was flooded"],
    },
    "zh": {
        "breed": ["柯基", "柴犬", "金毛", "边牧", "泰迪", "哈士奇"],
        "pet": ["豆包", "年糕", "可乐", "馒头", "芝麻", "布丁"],
        "treat": ["冻胡萝卜", "花生酱", "小黄鸭玩具", "旧袜子", "薰衣草喷雾", "温牛奶"],
        "hobby": ["陶艺", "水彩画", "拉丁舞", "木工", "书法", "攀岩"],
        "teacher": ["周老师", "吴老师", "郑老师", "孙老师", "钱老师", "冯老师"],
        "piece": ["一把青瓷茶壶", "一幅西湖写生", "最后那段双人舞", "一张胡桃木凳子", "一幅行书对联", "那条仰角线路"],
        "city": ["大理", "厦门", "西安", "哈尔滨", "成都", "青岛"],
        "sight": ["洱海边的骑行", "鼓浪屿的老房子", "城墙上的夜景", "冰雪大世界", "熊猫基地", "栈桥的日落"],
        "role": ["组长", "高级分析师", "设计主管", "运营经理", "资深工程师", "产品负责人"],
        "company": ["星河科技", "蓝峰咨询", "云雀实验室", "青松集团", "鹰眼医疗", "光影传媒"],
        "team": ["四", "六", "八", "三", "五", "七"],
        "project": ["计费系统重构", "新版手机应用", "仓库盘点", "医院挂号平台", "客户满意度调查", "播客上线"],
        "sport": ["篮球", "网球", "足球", "排球", "羽毛球", "壁球"],
        "physio": ["黄医生", "林医生", "何医生", "罗医生", "高医生", "梁医生"],
        "weeks": ["三", "五", "六", "四", "两", "八"],
        "sibling": ["小雨", "小雪", "小月", "小琳", "小婷", "小敏"],
        "venue": ["葡萄园", "海边灯塔", "植物园", "老谷仓", "湖边民宿", "屋顶花园"],
        "spouse": ["浩然", "子轩", "俊杰", "明哲", "宇航", "思远"],
        "book": ["《盐路》", "《玻璃果园》", "《冬日账簿》", "《安静的引擎》", "《纸潮》", "《无名之北》"],
        "author": ["苏晚", "顾川", "沈默", "陆遥", "林溪", "江舟"],
        "twist": ["守塔人就是叙述者", "双胞胎互换了信件", "那张地图是伪造的", "引擎根本不存在", "信从未寄出",
                  "小镇早已被淹没"],
    },
}

# storyline → list of (session offset, user turn template, assistant reply template)
STORIES = {
    "en": {
        "pet": [
            (0, "Big news: yesterday we brought home a {breed} from the shelter. We named him {pet}.",
             "Congratulations! A {breed} is a lovely companion. How is the first night going?"),
            (3, "{pet} has been chewing every shoe in the flat. The only thing that calms him down is {treat}.",
             "That phase usually passes. Keep {treat} handy and praise him when he settles."),
        ],
        "hobby": [
            (1, "Last week I signed up for a {hobby} class at the community centre, Thursday evenings.",
             "What a nice way to unwind after work. Have you tried {hobby} before?"),
            (4, "{teacher} said {piece} I made was the best in the group. I nearly cried.",
             "That is a real compliment. You must have put a lot of care into it."),
            (7, "The {hobby} exhibition is this Saturday and I am showing three pieces, {piece} included.",
             "Good luck on Saturday! Showing your work is a big step."),
        ],
        "trip": [
            (2, "We are finally planning a trip to {city}. Flights are booked for the middle of next month.",
             "{city} sounds wonderful. Do you have a list of things to see?"),
            (5, "Just got back from {city} two days ago! {sight} was incredible, I could have stayed a week.",
             "Welcome back! It sounds like {sight} was the highlight."),
        ],
        "work": [
            (3, "I got the promotion today: I am now {role} at {company}!",
             "Congratulations, that is well deserved. When do you start in the new role?"),
            (6, "Running a team of {team} people is harder than I thought. Our first big job is {project}.",
             "Leading {team} people takes time to learn. {project} sounds like a good first challenge."),
        ],
        "injury": [
            (4, "I sprained my ankle playing {sport} on Saturday, so I am stuck on the sofa.",
             "Ouch, I am sorry. Keep it raised and iced for the first days."),
            (8, "{physio} checked the ankle this morning and says I can run again in {weeks} weeks.",
             "Good news, slow and steady. Follow the exercises {physio} gave you."),
        ],
        "wedding": [
            (5, "My sister {sibling} is getting married at {venue} and asked me to give a toast.",
             "What an honour! Have you started writing the toast?"),
            (9, "The wedding was lovely. {spouse} gave the best speech of the night, everyone was in tears.",
             "That sounds like a beautiful day. How did your toast go?"),
        ],
        "book": [
            (6, "I started reading {book} by {author}; a colleague lent it to me.",
             "I have heard good things about {author}. How far in are you?"),
            (9, "Finished {book} last night. I did not see it coming that {twist}.",
             "Endings like that make you want to read it again from the start."),
        ],
    },
    "zh": {
        "pet": [
            (0, "告诉你个好消息：昨天我们从救助站领回了一只{breed}，给它起名叫{pet}。",
             "恭喜！{breed}很亲人。第一晚还适应吗？"),
            (3, "{pet}最近把家里的鞋都咬坏了，只有{treat}能让它安静下来。",
             "这个阶段会过去的，手边备好{treat}，它安静时多夸夸它。"),
        ],
        "hobby": [
            (1, "上周我在社区中心报了一个{hobby}班，每周四晚上上课。",
             "下班后放松一下挺好的。以前学过{hobby}吗？"),
            (4, "{teacher}说我做的{piece}是全班最好的，我差点哭了。",
             "这是很高的评价，你一定花了很多心思。"),
            (7, "{hobby}作品展这周六开幕，我有三件作品参展，包括{piece}。",
             "周六加油！把作品拿出来展示是很大的一步。"),
        ],
        "trip": [
            (2, "我们终于开始计划去{city}玩了，机票订在下个月中旬。",
             "{city}很不错，想好要去哪些地方了吗？"),
            (5, "前天刚从{city}回来！{sight}太震撼了，真想再多待一周。",
             "欢迎回来！听起来{sight}是这次的亮点。"),
        ],
        "work": [
            (3, "今天升职了：我现在是{company}的{role}！",
             "恭喜，实至名归。新岗位什么时候开始？"),
            (6, "带一个{team}人的团队比我想的难多了，我们接手的第一个大活是{project}。",
             "带{team}个人需要时间学习，{project}是个不错的开始。"),
        ],
        "injury": [
            (4, "周六打{sport}的时候把脚踝扭了，现在只能躺在沙发上。",
             "哎呀，头几天记得抬高、冰敷。"),
            (8, "今天上午{physio}复查了脚踝，说再过{weeks}周就可以跑步了。",
             "好消息，慢慢来，按{physio}给的动作练。"),
        ],
        "wedding": [
            (5, "我妹妹{sibling}要在{venue}办婚礼，让我上台致辞。",
             "这是很大的荣幸！致辞开始写了吗？"),
            (9, "婚礼特别美好，{spouse}的发言是全场最感人的，大家都哭了。",
             "听起来是很美的一天。你的致辞讲得怎么样？"),
        ],
        "book": [
            (6, "我开始读{author}的{book}，是同事借给我的。",
             "听说{author}写得很好，读到哪里了？"),
            (9, "昨晚读完了{book}，完全没想到{twist}。",
             "这样的结局会让人想从头再读一遍。"),
        ],
    },
}

# storyline → questions: (category, template, indexes of the story turns that are the evidence)
QUESTIONS = {
    "en": {
        "pet": [("single-hop", "What kind of dog did {name} adopt?", [0]),
                ("temporal", "When did {name} adopt the dog?", [0]),
                ("multi-hop", "What is the only thing that settles {name}'s new dog?", [1, 0]),
                ("adversarial", "What did {name} name the cat from the shelter?", [0])],
        "hobby": [("single-hop", "Which evening class did {name} join at the community centre?", [0]),
                  ("temporal", "When did {name} sign up for the {hobby} class?", [0]),
                  ("temporal", "What did {name} say about {hobby} in {month2}?", [2]),
                  ("multi-hop", "Whose praise made {name} nearly cry in the {hobby} class?", [1, 0]),
                  ("adversarial", "Which {hobby} class did {name}'s brother join?", [0])],
        "trip": [("single-hop", "What was the highlight of {name}'s holiday in {city}?", [1]),
                 ("temporal", "When did {name} come back from {city}?", [1]),
                 ("multi-hop", "What impressed {name} most in the place whose flights were booked for the middle of the month?", [1, 0]),
                 ("adversarial", "What did {name} think of the museums in {city}?", [1])],
        "work": [("single-hop", "Which company promoted {name}?", [0]),
                 ("temporal", "When did {name} get promoted?", [0]),
                 ("multi-hop", "What is the first big project of the team {name} leads as {role}?", [1, 0]),
                 ("adversarial", "Why did {name} quit {company}?", [0])],
        "injury": [("single-hop", "How did {name} hurt the ankle?", [0]),
                   ("temporal", "When did {name} sprain the ankle?", [0]),
                   ("multi-hop", "How long until {name} can run again after the {sport} injury?", [1, 0]),
                   ("adversarial", "Which knee did {name} injure playing {sport}?", [0])],
        "wedding": [("single-hop", "Where is {name}'s sister getting married?", [0]),
                    ("temporal", "What did {name} tell about the wedding in {month1}?", [1]),
                    ("multi-hop", "Who gave the most moving speech at {sibling}'s wedding?", [1, 0]),
                    ("adversarial", "Where did {name}'s brother get married?", [0])],
        "book": [("single-hop", "Who wrote the novel {name} borrowed from a colleague?", [0]),
                 ("temporal", "When did {name} finish {book}?", [1]),
                 ("multi-hop", "What surprised {name} at the end of the book by {author}?", [1, 0]),
                 ("adversarial", "What did {name} think of the film of {book}?", [0])],
    },
    "zh": {
        "pet": [("single-hop", "{name}领养的是什么品种的狗？", [0]),
                ("temporal", "{name}是什么时候领养狗的？", [0]),
                ("multi-hop", "什么东西能让{name}新养的狗安静下来？", [1, 0]),
                ("adversarial", "{name}从救助站领的那只猫叫什么？", [0])],
        "hobby": [("single-hop", "{name}在社区中心报了什么晚间课程？", [0]),
                  ("temporal", "{name}什么时候报的{hobby}班？", [0]),
                  ("temporal", "{name}{month2}说了哪些关于{hobby}的事？", [2]),
                  ("multi-hop", "{hobby}课上谁的夸奖让{name}差点哭了？", [1, 0]),
                  ("adversarial", "{name}的哥哥报了哪个{hobby}班？", [0])],
        "trip": [("single-hop", "{name}这次去{city}旅行印象最深的是什么？", [1]),
                 ("temporal", "{name}哪天从{city}回来的？", [1]),
                 ("multi-hop", "{name}订了下个月中旬机票的那次旅行，最震撼的是什么？", [1, 0]),
                 ("adversarial", "{name}觉得{city}的博物馆怎么样？", [1])],
        "work": [("single-hop", "{name}在哪家公司升的职？", [0]),
                 ("temporal", "{name}是什么时候升职的？", [0]),
                 ("multi-hop", "{name}当上{role}以后，团队的第一个大项目是什么？", [1, 0]),
                 ("adversarial", "{name}为什么从{company}辞职？", [0])],
        "injury": [("single-hop", "{name}的脚踝是怎么受伤的？", [0]),
                   ("temporal", "{name}什么时候扭伤了脚踝？", [0]),
                   ("multi-hop", "{name}打{sport}受伤后要多久才能跑步？", [1, 0]),
                   ("adversarial", "{name}打{sport}伤的是哪个膝盖？", [0])],
        "wedding": [("single-hop", "{name}的妹妹在哪里办婚礼？", [0]),
                    ("temporal", "{name}{month1}聊婚礼时说了什么？", [1]),
                    ("multi-hop", "{sibling}的婚礼上谁的发言最感人？", [1, 0]),
                    ("adversarial", "{name}的哥哥在哪里结的婚？", [0])],
        "book": [("single-hop", "{name}从同事那借的小说是谁写的？", [0]),
                 ("temporal", "{name}哪天读完的{book}？", [1]),
                 ("multi-hop", "{author}那本书的结局让{name}吃惊的是什么？", [1, 0]),
                 ("adversarial", "{name}觉得{book}改编的电影怎么样？", [0])],
    },
}

SMALL_TALK = {
    "en": ["Morning! Slept badly, the neighbours had a party.", "It rained all day here, so I stayed in.",
           "I am trying to drink less coffee this week.", "Work was quiet today, mostly emails.",
           "Any idea what to cook tonight? I have rice and some vegetables.", "I watched a documentary about octopuses.",
           "My phone battery dies by lunchtime now.", "The bus was late again this morning.",
           "I finally cleaned the kitchen properly.", "Do you think a standing desk is worth it?",
           "I keep forgetting to water the plants.", "Thinking about repainting the bedroom green.",
           "My neighbour's dog barked all night, I barely slept.", "A friend of mine just came back from a trip abroad.",
           "My cousin took a cooking class last year and loved it.", "The gym was packed this evening.",
           "I bought a new pair of running shoes on sale.", "There was a street market near the station today.",
           "My brother called, he is busy with his new flat.", "Someone at work is reading a thriller everyone talks about.",
           "My colleague got promoted last month and now never has time for lunch.",
           "A friend's wedding is in the autumn, I still need a suit.", "I twisted my wrist years ago and it still aches.",
           "My friend is planning a trip to the mountains with her dog.", "The library near us has a book sale next week.",
           "Our manager wants everyone back in the office on Mondays.", "The shelter down the road needs volunteers.",
           "I went for a short run this morning, my legs are sore.", "My mother keeps asking when I will visit.",
           "There is a new art class at the school, my niece loves it.", "I tried a new cafe near the office, great cake.",
           "Our flight home last year was delayed six hours.", "I finished a puzzle of a thousand pieces yesterday.",
           "The cat next door sleeps on our balcony every afternoon.", "My sister sent photos from her garden."],
    "zh": ["早上好！昨晚邻居开派对，没睡好。", "今天下了一整天雨，我就在家待着。", "这周我想少喝点咖啡。",
           "今天工作挺清闲，基本都在回邮件。", "今晚做什么菜好？家里有米和一些青菜。", "我看了一部讲章鱼的纪录片。",
           "我的手机电池到中午就没电了。", "今天早上公交又晚点了。", "终于把厨房彻底打扫了一遍。",
           "你觉得升降桌值得买吗？", "我总是忘记给花浇水。", "在考虑把卧室刷成绿色。", "邻居家的狗叫了一整晚，我几乎没睡。",
           "我一个朋友刚从国外旅行回来。", "我表妹去年上过烹饪课，很喜欢。", "今晚健身房人特别多。",
           "打折买了一双新跑鞋。", "今天车站附近有个集市。", "我哥打电话来，他在忙新房子的事。", "同事都在聊一本悬疑小说。",
           "我同事上个月升职了，现在连午饭都没空吃。", "朋友的婚礼在秋天，我还得买套西装。", "我几年前扭过手腕，现在还会疼。",
           "朋友打算带着她的狗去山里旅行。", "我们附近的图书馆下周有旧书特卖。", "领导要求大家每周一回办公室上班。",
           "路口那家救助站在招志愿者。", "今天早上跑了一小段，腿有点酸。", "我妈一直问我什么时候回家。",
           "学校新开了一个美术班，我外甥女很喜欢。", "公司附近新开了家咖啡馆，蛋糕很好吃。", "去年我们回家的航班晚点了六个小时。",
           "昨天拼完了一幅一千片的拼图。", "邻居家的猫每天下午都在我们阳台上睡觉。", "我姐发来了她花园的照片。"],
}
REPLIES = {
    "en": ["That sounds like a long day. Take it easy tonight.", "Ha, I know the feeling.", "Good idea, small steps help.",
           "Maybe try a simple stir fry?", "Interesting! What did you learn?", "That is annoying, sorry to hear.",
           "Nice, little wins count.", "Tell me more when you have time."],
    "zh": ["听起来挺累的，今晚好好休息。", "哈哈，我懂这种感觉。", "好主意，一点一点来。", "要不简单炒个菜？",
           "有意思！学到了什么？", "真烦人，辛苦了。", "不错，小进步也算数。", "有空再跟我多说说。"],
}


def _date(day: datetime, minute: int) -> str:
    return (day + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")


def conversation(lang: str, index: int, rng: random.Random) -> tuple[dict, list[dict]]:
    conv_id = f"{lang}{index + 1:02d}"
    name = EN_PEOPLE[index][0] if lang == "en" else ZH_PEOPLE[index]
    values = {key: options[(index + rng.randint(0, 5)) % len(options)] for key, options in VALUES[lang].items()}
    values["name"] = name
    start = datetime(2024, 1 + rng.randint(0, 4), 1 + rng.randint(0, 20), 18, 0, tzinfo=UTC)
    days, day = [], start
    for _ in range(SESSIONS):
        days.append(day)
        day += timedelta(days=rng.randint(4, 13))
    months = EN_MONTHS if lang == "en" else ZH_MONTHS
    stories = rng.sample(sorted(STORIES[lang]), len(STORIES[lang]))
    planned: dict[int, list[tuple[str, int]]] = {}
    for story in stories:
        for n, (offset, _, _) in enumerate(STORIES[lang][story]):
            planned.setdefault(offset, []).append((story, n))
    sessions, turn_ids = [], {}
    for s, day in enumerate(days):
        rows: list[dict] = []
        beats = planned.get(s, [])
        talk = rng.sample(SMALL_TALK[lang], 12)
        slots = sorted(rng.sample(range(len(talk) + len(beats)), len(beats)))
        beat_iter, talk_iter = iter(beats), iter(talk)
        for slot in range(len(talk) + len(beats)):
            if slot in slots:
                story, n = next(beat_iter)
                _, user, reply = STORIES[lang][story][n]
                turn_ids[(story, n)] = f"{conv_id}s{s + 1}t{len(rows) + 1}"
                pair = (user.format(**values), reply.format(**values))
            else:
                pair = (next(talk_iter), rng.choice(REPLIES[lang]))
            for role, text in zip(("user", "assistant"), pair, strict=True):
                rows.append({"id": f"{conv_id}s{s + 1}t{len(rows) + 1}", "role": role, "content": text,
                             "date": _date(day, 3 * len(rows))})
        sessions.append({"id": f"{conv_id}s{s + 1}", "title": f"{name} · {day.date().isoformat()}", "turns": rows})
    questions = []
    for story in stories:
        beats = STORIES[lang][story]
        story_values = dict(values)
        for n, (offset, _, _) in enumerate(beats):
            story_values[f"month{n}"] = months[days[offset].month - 1]
        for category, template, evidence in QUESTIONS[lang][story]:
            named = re.search(r"\{month(\d)\}", template)
            if named:  # every turn of the storyline in the month the question names
                month = days[beats[int(named.group(1))][0]].month
                evidence = [n for n, (offset, _, _) in enumerate(beats) if days[offset].month == month]
            questions.append({"id": f"{conv_id}q{len(questions) + 1}", "question": template.format(**story_values),
                              "project": f"life-{conv_id}", "category": category, "conversation": conv_id,
                              "answer_turns": [turn_ids[(story, evidence[0])]] if category == "multi-hop"
                              else [turn_ids[(story, n)] for n in evidence],
                              "evidence_turns": [turn_ids[(story, n)] for n in evidence]})
    return {"id": conv_id, "project": f"life-{conv_id}", "agent": "openai", "sessions": sessions}, questions


def build() -> dict:
    rng = random.Random(17)
    conversations, questions = [], []
    for lang in ("en", "zh"):
        for index in range(6):
            conv, asked = conversation(lang, index, rng)
            conversations.append(conv)
            questions.extend(asked)
    return {"name": "life-qa", "version": 1,
            "description": ("Long multi-session conversations (en/zh), dated sessions; single-hop, temporal, "
                            "multi-hop and adversarial questions with turn-level evidence."),
            "conversations": conversations, "questions": questions}


if __name__ == "__main__":
    data = build()
    out = Path(__file__).with_name("life_qa.json")
    out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{out}: {len(data['conversations'])} conversations, {len(data['questions'])} questions")
