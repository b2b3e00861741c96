"""Control for attack_tfq_shadow: the weak-seal fakes alone (no record rewriting, no shadowing)."""
import attack_tfq_shadow as shadow


def make(task, files):
    return shadow.make(task, files, shadow=False)
